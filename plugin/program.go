package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/ground/tailbuf"
	"github.com/mst-eval/mst/transcript"
)

// ProgramPrefix starts the file name of every program plugin.
const ProgramPrefix = "mst-plugin-"

// maxLine bounds one line a program plugin writes (a dataset's cases come
// in one response).
const maxLine = 256 << 20

// GradeTimeout bounds one grader/grade call, LoadTimeout one
// dataset/load call, and StartTimeout the start of a program up to its
// initialize response.
var (
	GradeTimeout = 60 * time.Second
	LoadTimeout  = 10 * time.Minute
	StartTimeout = 30 * time.Second
)

// programEnv is the environment a program plugin starts with: where
// programs and its home are, the locale and the temporary folder.
func programEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT", "PYTHONPATH", "NODE_PATH"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Program is a program plugin: an executable that speaks Protocol. It is
// started when first needed, serves every call of the mst process that
// found it, one at a time, and stops at Close. A program that crashes is
// started again at the next call.
type Program struct {
	// Path is the executable; Namespace comes from its name.
	Path, Namespace string
	MSTVersion      string

	mu       sync.Mutex
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   io.ReadCloser
	lines    *bufio.Scanner
	stderr   *tailbuf.Buffer
	nextID   int64
	manifest *Manifest
}

// FindPrograms lists the program plugins in the folders of path (a list
// such as MST_PLUGIN_PATH's), one per namespace: a program in an earlier
// folder shadows one of the same name in a later folder (shadowed lists
// those). Folders that do not exist are skipped.
func FindPrograms(path string) (found []*Program, shadowed []string) {
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			ns, ok := strings.CutPrefix(name, ProgramPrefix)
			if !ok || e.IsDir() {
				continue
			}
			if runtime.GOOS == "windows" {
				ns = strings.TrimSuffix(ns, filepath.Ext(ns))
			}
			full := filepath.Join(dir, name)
			if st, err := os.Stat(full); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				continue
			}
			if seen[ns] {
				shadowed = append(shadowed, full)
				continue
			}
			seen[ns] = true
			found = append(found, &Program{Path: full, Namespace: ns})
		}
	}
	return found, shadowed
}

// Manifest starts the program if it is not running and returns what it
// said at initialize.
func (p *Program) Manifest(ctx context.Context) (*Manifest, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.startLocked(ctx); err != nil {
		return nil, err
	}
	return p.manifest, nil
}

// startLocked starts the program and initializes it, unless it runs.
func (p *Program) startLocked(ctx context.Context) error {
	if p.cmd != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	cmd := exec.Command(p.Path)
	cmd.Dir = filepath.Dir(p.Path)
	// The program gets a plain environment, not MST's: the credentials
	// it needs come in its requests (dataset/load), and no other key of
	// the run reaches it.
	cmd.Env = programEnv()
	// A child the program leaves behind may hold its stderr open; Wait
	// stops waiting for it a second after the program ends.
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p.stderr = tailbuf.New(4096)
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("plugin %s: starting %s: %w", p.Namespace, p.Path, err)
	}
	p.cmd, p.stdin, p.stdout = cmd, stdin, stdout
	p.lines = bufio.NewScanner(stdout)
	p.lines.Buffer(make([]byte, 64<<10), maxLine)
	var m Manifest
	if err := p.callLocked(ctx, MethodInitialize, InitializeParams{Protocol: Protocol, MSTVersion: p.MSTVersion}, &m); err != nil {
		p.stopLocked()
		return fmt.Errorf("plugin %s: %s did not initialize: %w", p.Namespace, p.Path, err)
	}
	if m.Protocol != Protocol {
		p.stopLocked()
		return fmt.Errorf("plugin %s: %s speaks %q; this mst speaks %s: install a version of the plugin made for it", p.Namespace, p.Path, m.Protocol, Protocol)
	}
	if m.Namespace != p.Namespace {
		p.stopLocked()
		return fmt.Errorf("plugin %s: %s says its namespace is %q; a program plugin's file is named %s followed by its namespace", p.Namespace, p.Path, m.Namespace, ProgramPrefix)
	}
	if m.Version == "" {
		p.stopLocked()
		return fmt.Errorf("plugin %s: %s gives no version in its initialize result", p.Namespace, p.Path)
	}
	for _, k := range slices.Concat(m.DatasetSources, m.Graders, m.Clients) {
		if err := CheckName(k.Name); err != nil {
			p.stopLocked()
			return fmt.Errorf("plugin %s: %w", p.Namespace, err)
		}
	}
	p.manifest = &m
	return nil
}

// call sends one request and decodes its result into out, starting the
// program first if needed.
func (p *Program) call(ctx context.Context, method string, params, out any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.startLocked(ctx); err != nil {
		return err
	}
	err := p.callLocked(ctx, method, params, out)
	var rpc *RPCError
	if err != nil && !errors.As(err, &rpc) {
		// The program failed or the call was interrupted: it starts
		// again at the next call.
		p.stopLocked()
	}
	return err
}

func (p *Program) callLocked(ctx context.Context, method string, params, out any) error {
	p.nextID++
	id := p.nextID
	line, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return err
	}
	type reply struct {
		resp rpcResponse
		err  error
	}
	done := make(chan reply, 1)
	go func() {
		if _, err := p.stdin.Write(append(line, '\n')); err != nil {
			done <- reply{err: fmt.Errorf("writing to the plugin: %w%s", err, p.tail())}
			return
		}
		for p.lines.Scan() {
			var r rpcResponse
			if err := json.Unmarshal(p.lines.Bytes(), &r); err != nil || r.JSONRPC != "2.0" {
				done <- reply{err: fmt.Errorf("the plugin wrote a line that is not a JSON-RPC 2.0 response (its stdout carries %s only; logs belong on stderr): %.200q", Protocol, p.lines.Text())}
				return
			}
			if r.ID == nil || *r.ID != id {
				continue // a late answer to an interrupted call
			}
			done <- reply{resp: r}
			return
		}
		err := p.lines.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		done <- reply{err: fmt.Errorf("the plugin ended before answering %s (%v)%s", method, err, p.tail())}
	}()
	select {
	case <-ctx.Done():
		p.stopLocked()
		<-done
		return fmt.Errorf("%s: %w", method, context.Cause(ctx))
	case r := <-done:
		if r.err != nil {
			return r.err
		}
		if r.resp.Error != nil {
			return r.resp.Error
		}
		if out != nil {
			if err := json.Unmarshal(r.resp.Result, out); err != nil {
				return fmt.Errorf("the plugin's result of %s is not what %s says: %w", method, Protocol, err)
			}
		}
		return nil
	}
}

// tail is the end of the program's stderr, for an error.
func (p *Program) tail() string {
	if p.stderr == nil {
		return ""
	}
	s := strings.TrimSpace(p.stderr.String())
	if s == "" {
		return ""
	}
	return "; its stderr ends with:\n" + s
}

// stopLocked ends the program: stdin closes, then it is killed if it has
// not exited within a few seconds.
func (p *Program) stopLocked() {
	if p.cmd == nil {
		return
	}
	cmd := p.cmd
	p.cmd = nil
	p.stdin.Close()
	// A child of the program may hold its stdout open: closing our end
	// ends a read that waits on it.
	p.stdout.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// Close asks the program to shut down and waits for it to end.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p.callLocked(ctx, MethodShutdown, nil, nil)
	p.stopLocked()
	return nil
}

// Plugin returns the program as a Plugin: its dataset sources and graders,
// each calling the program.
func (p *Program) Plugin(ctx context.Context) (Plugin, error) {
	m, err := p.Manifest(ctx)
	if err != nil {
		return Plugin{}, err
	}
	pl := Plugin{Namespace: p.Namespace, Version: m.Version, Description: m.Description, Module: p.Path}
	for _, k := range m.DatasetSources {
		name := k.Name
		pl.DatasetSources = append(pl.DatasetSources, &dataset.SourceDefinition{
			Name: name, Description: k.Description, Options: k.Options, Credentials: k.Credentials,
			LoadJSON: func(ctx context.Context, sp dataset.SourceParams) ([]json.RawMessage, error) {
				creds := map[string]string{}
				for _, c := range k.Credentials {
					if v, ok := sp.Env(c); ok {
						creds[c] = v
					}
				}
				ctx, cancel := context.WithTimeout(ctx, LoadTimeout)
				defer cancel()
				var res DatasetLoadResult
				if err := p.call(ctx, MethodDatasetLoad, DatasetLoadParams{Name: name, Options: sp.Options, Dir: sp.Dir, Credentials: creds}, &res); err != nil {
					return nil, err
				}
				return res.Cases, nil
			},
		})
	}
	for _, k := range m.Clients {
		pl.Clients = append(pl.Clients, p.programClient(k))
	}
	for _, k := range m.Graders {
		name := k.Name
		pl.Graders = append(pl.Graders, &grade.Definition{
			Name: name, Description: k.Description, Options: k.Options,
			New: func(options json.RawMessage) (grade.Grader, error) {
				ctx, cancel := context.WithTimeout(context.Background(), GradeTimeout)
				defer cancel()
				var res GraderCheckResult
				if err := p.call(ctx, MethodGraderCheck, GraderCheckParams{Name: name, Options: options}, &res); err != nil {
					return nil, err
				}
				return &programGrader{p: p, name: name, options: options, label: res.Label}, nil
			},
		})
	}
	return pl, nil
}

// programGrader grades by asking the program.
type programGrader struct {
	p       *Program
	name    string
	options json.RawMessage
	label   string
}

func (g *programGrader) Name() string { return g.label }

func (g *programGrader) Grade(t *transcript.Transcript) grade.Result {
	ctx, cancel := context.WithTimeout(context.Background(), GradeTimeout)
	defer cancel()
	var res GraderGradeResult
	if err := g.p.call(ctx, MethodGraderGrade, GraderGradeParams{Name: g.name, Options: g.options, Transcript: t}, &res); err != nil {
		return grade.Result{Error: fmt.Sprintf("plugin %s: %v", g.p.Namespace, err)}
	}
	return grade.Result{Passed: res.Passed, Detail: res.Detail, Error: res.Error}
}

// programClient returns the client.Definition of one client a program
// adds: a run-only client behind MST's proxies, one trial at a time.
func (p *Program) programClient(k ManifestKind) *client.Definition {
	name := k.Name
	d := &client.Definition{
		Name: name, Description: k.Description, Options: k.Options,
		Requirements:   client.Requirements{Credentials: k.Credentials, Setup: "install " + p.Path + " on the machines that run trials, at the coordinator's version"},
		ModelProviders: k.ModelProviders,
		Timeout:        time.Duration(k.TimeoutSeconds) * time.Second,
		KeyVars:        k.Credentials,
		ProxiedServers: true,
		// The plugin program's own version: the same for every setting.
		Version: func(context.Context, json.RawMessage) (string, error) { return p.version(), nil },
	}
	d.Run = func(ctx context.Context, op client.OpenParams, t client.Trial) (client.Result, error) {
		params := ClientRunParams{
			Name: name, Variant: op.Variant, Model: op.Model, Options: op.Options,
			TimeoutMs: op.Timeout.Milliseconds(), Credentials: map[string]string{},
			Trial:   ClientTrial{Key: t.Key, Prompt: t.Prompt, Metadata: t.Metadata},
			Servers: []ClientServer{},
		}
		for _, c := range k.Credentials {
			if v, ok := op.Env[c]; ok {
				params.Credentials[c] = v
			}
		}
		for _, s := range op.TrialServers(t) {
			params.Servers = append(params.Servers, ClientServer{Name: s.Name, URL: s.URL, Headers: s.Headers})
		}
		var res ClientRunResult
		if err := p.call(ctx, MethodClientRun, params, &res); err != nil {
			return client.Result{}, fmt.Errorf("plugin %s: %w", p.Namespace, err)
		}
		out := client.Result{
			Answer: res.Answer, Messages: res.Messages, ToolCalls: res.ToolCalls, Usage: res.Usage,
			ClientVersion: p.version(), ClientTelemetry: res.Telemetry,
		}
		switch {
		case res.Outcome != nil:
			out.Outcome = *res.Outcome
			switch out.Outcome.Status {
			case transcript.Answered, transcript.NoAnswer:
			case transcript.Errored:
				if out.Outcome.Cause == "" {
					out.Outcome.Cause = transcript.CauseClient
				}
			default:
				out.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient,
					Detail: fmt.Sprintf("the plugin gave the outcome %q; a client gives answered, no-answer or errored", res.Outcome.Status)}
			}
		case res.Answer != "":
			out.Outcome = transcript.Outcome{Status: transcript.Answered}
		default:
			out.Outcome = transcript.Outcome{Status: transcript.NoAnswer}
		}
		return out, nil
	}
	return d
}

// version is the program's version, "" before it initialized.
func (p *Program) version() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.manifest == nil {
		return ""
	}
	return p.manifest.Version
}
