package cliproc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// Program is what a CLI client knows of the program it drives before it
// runs it: what to call it in errors, how to install it, which one
// clientOptions name, and how it prints its version.
type Program struct {
	// Client is the client's name ("codex-cli"), which prefixes errors.
	Client string
	// What names the program ("the Codex CLI"); Setup says how to install
	// it ("npm install -g @openai/codex").
	What, Setup string
	// Command reads, from clientOptions (already valid against the
	// client's schema), the program to run: a name on PATH or a path.
	Command func(options json.RawMessage) (string, error)
	// VersionPrefix is what the program prints before its version number
	// ("codex-cli"), if anything; VersionEnv are variables (KEY=value) its
	// `--version` needs besides VersionEnv's, never a secret.
	VersionPrefix string
	VersionEnv    []string
}

// Preflight checks that the program a variant's clientOptions name is
// installed on this machine: a client's Definition.Preflight.
func (p Program) Preflight(options json.RawMessage) error {
	command, err := p.Command(options)
	if err != nil {
		return err
	}
	return p.Require(command)
}

// Version returns the version of the program a setting with these options
// runs (clientOptions.command, found as Find finds it): a client's
// Definition.Version.
func (p Program) Version(ctx context.Context, options json.RawMessage) (string, error) {
	command, err := p.Command(options)
	if err != nil {
		return "", err
	}
	bin, err := p.Find(command)
	if err != nil {
		return "", err
	}
	return p.VersionOf(ctx, bin)
}

// VersionOf returns the version of the program at bin (Version).
func (p Program) VersionOf(ctx context.Context, bin string) (string, error) {
	v, err := Version(ctx, bin, p.VersionPrefix, p.VersionEnv...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Client, err)
	}
	return v, nil
}

// Find returns the absolute path of the program, run as command (a name on
// PATH or a path).
func (p Program) Find(command string) (string, error) {
	bin, err := Find(p.What, command, p.Setup)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Client, err)
	}
	return bin, nil
}

// Require checks, for the client's preflight, that command is installed on
// this machine.
func (p Program) Require(command string) error {
	return Require(p.What, command, p.Setup, p.VersionEnv...)
}

// RefuseToolOverrides is the package's RefuseToolOverrides, for the
// client, its error prefixed with the client's name.
func (p Program) RefuseToolOverrides(list []servers.Server) error {
	if err := RefuseToolOverrides(p.Client, list); err != nil {
		return fmt.Errorf("%s: %w", p.Client, err)
	}
	return nil
}

// Open is a CLI client's Open: it finds the program the options name and
// opens a session on it with open. A nil *T from open becomes a nil
// Session (a nil pointer in an interface is not nil), so that the caller's
// error check holds; a non-nil one is returned with open's error, for the
// caller to Close.
func Open[T any, S interface {
	*T
	client.Session
}](ctx context.Context, params client.OpenParams, p Program, open func(context.Context, client.OpenParams, string) (S, error)) (client.Session, error) {
	command, err := p.Command(params.Options)
	if err != nil {
		return nil, err
	}
	bin, err := p.Find(command)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, params, bin)
	if s == nil {
		return nil, err
	}
	return s, err
}

// SessionDir makes a session's own folder under workDir (the system's
// temporary folder when empty), named for the client.
func SessionDir(workDir, client string) (string, error) {
	if workDir == "" {
		workDir = os.TempDir()
	}
	dir, err := os.MkdirTemp(workDir, client+"-")
	if err != nil {
		return "", fmt.Errorf("%s: creating the session folder: %w", client, err)
	}
	return dir, nil
}

// Env is a CLI's whole environment: PATH with bin's folder first (see
// PathWith), the variables named in inherit as MST's own environment has
// them, then each of layers in order, a later value replacing an earlier
// one. It holds nothing else, and is sorted.
func Env(bin string, inherit []string, layers ...map[string]string) []string {
	m := map[string]string{"PATH": PathWith(bin)}
	for _, k := range inherit {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for _, l := range layers {
		for k, v := range l {
			m[k] = v
		}
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// TokensDirEnv is the variable of OpenParams.Env that names the worker's
// folder of tokens (shard.TokensDirEnv; repeated here, as shard imports
// the clients).
const TokensDirEnv = "MST_TOKENS_DIR"

// Only is the part of a variant's values (OpenParams.Env) a CLI gets: the
// variables named in names (its provider key) and TokensDirEnv, and none of
// the run's other secrets, which the CLI has no use for and could print or
// hand on to the servers it starts. Empty names and missing variables are
// left out.
func Only(env map[string]string, names ...string) map[string]string {
	out := map[string]string{}
	for _, k := range append(names, TokensDirEnv) {
		if v, ok := env[k]; ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// ServerInfos describes servers for the transcript by name and transport,
// as a CLI client knows them without connecting.
func ServerInfos(list []servers.Server) []transcript.ServerInfo {
	var infos []transcript.ServerInfo
	for _, srv := range list {
		infos = append(infos, transcript.ServerInfo{Name: srv.Name, Transport: srv.Transport()})
	}
	return infos
}
