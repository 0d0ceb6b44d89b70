// Package runner is an example Go plugin that adds one runner kind,
// acme-infra/runner/subdir: each shard runs as a child `mst collect` process in
// a folder of its own under a root folder, on this machine.
//
// It shows how a runner is written with the public runner API: the plugin
// only says how to make a machine (a folder) and how to reach it (run a
// command there, copy files in and out); runner.MachineRunner does the
// rest, the same way for every runner (copy the bundle, start the worker,
// connect the protocol, bring transcripts back, remove the machine).
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/mst-eval/mst/plugin"
	mstrunner "github.com/mst-eval/mst/runner"
)

// Plugin is the acme plugin with its one runner.
func Plugin() plugin.Plugin {
	return plugin.Plugin{
		Namespace:   "acme-infra",
		Version:     "1.0.0",
		Description: "Example runner: each shard is a child mst process in a folder of its own.",
		Module:      "example.com/mst-plugins/runner",
		Runners:     []*mstrunner.Definition{Definition()},
	}
}

// Definition is the subdir runner kind, by its short name.
func Definition() *mstrunner.Definition {
	return &mstrunner.Definition{
		Name:        "subdir",
		Description: "Runs each shard as a child mst process in a folder of its own under root.",
		OS:          runtime.GOOS,
		Options: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{
  "root": {"type":"string","description":"Folder that holds the shards' folders (default: a new temporary folder, removed at the end)."}
}}`),
		MaxShards:   8,
		ThisMachine: true,
		New:         newRunner,
	}
}

// subdirRunner is MachineRunner over folders, and the root it may own.
type subdirRunner struct {
	mstrunner.Runner
	root  string
	owned bool
}

func newRunner(ctx context.Context, p mstrunner.Params) (mstrunner.Runner, error) {
	if len(p.MST) == 0 {
		return nil, errors.New("subdir runner: no mst command to start workers with")
	}
	root, owned := p.Options["root"], false
	if root == "" {
		dir, err := os.MkdirTemp("", "mst-subdir-")
		if err != nil {
			return nil, fmt.Errorf("subdir runner: making a root folder: %w", err)
		}
		root, owned = dir, true
	} else if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("subdir runner: root %s: %w (check --runner-option root)", root, err)
	}
	create := Machines(root, p.MST, p.Grace())
	return &subdirRunner{Runner: mstrunner.MachineRunner(create, p), root: root, owned: owned}, nil
}

// Close removes the root folder when the runner made it.
func (r *subdirRunner) Close() error {
	err := r.Runner.Close()
	if r.owned {
		err = errors.Join(err, os.RemoveAll(r.root))
	}
	return err
}

// Machines returns a function that makes, for each shard, a folder under
// root as its machine. Workers run the mst command; a command stopped by
// its context gets SIGTERM, and grace later SIGKILL.
func Machines(root string, mst []string, grace time.Duration) mstrunner.CreateMachine {
	return func(ctx context.Context, shard int) (mstrunner.Machine, error) {
		dir, err := os.MkdirTemp(root, fmt.Sprintf("shard-%d-", shard))
		if err != nil {
			return nil, fmt.Errorf("making the folder of shard %d under %s: %w", shard, root, err)
		}
		return &folder{dir: dir, mst: mst, grace: grace}, nil
	}
}

// folder is a machine: a folder of this machine.
type folder struct {
	dir   string
	mst   []string
	grace time.Duration
}

func (f *folder) ID() string                       { return "subdir:" + f.dir }
func (f *folder) WorkDir() string                  { return f.dir }
func (f *folder) MST() []string                    { return f.mst }
func (f *folder) Image() string                    { return "" }
func (f *folder) Remove(ctx context.Context) error { return os.RemoveAll(f.dir) }

// Exec runs argv in the folder. It returns when the command exits, even
// while stdin stays open (the coordinator keeps a worker's stdin open for
// the whole shard): stdin is copied by a goroutine that ends at the
// command's exit, not by os/exec, whose Wait would wait for it.
func (f *folder) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return errors.New("exec: no command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = f.dir
	cmd.Env = workerEnv()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A worker stops its servers and says done on SIGTERM; SIGKILL
	// follows after the grace.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = f.grace
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		if stdin != nil {
			io.Copy(in, stdin)
		}
		in.Close()
	}()
	return cmd.Wait()
}

// workerEnv is the little of this process's environment a worker needs:
// its secrets come from the coordinator over the protocol, so the user's
// keys stay behind.
func workerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "TMPDIR", k == "LANG", strings.HasPrefix(k, "LC_"), strings.HasPrefix(k, "MST_"):
			env = append(env, kv)
		}
	}
	return env
}

// CopyTo copies the folder localDir to remoteDir, which it creates.
func (f *folder) CopyTo(ctx context.Context, localDir, remoteDir string) error {
	return os.CopyFS(remoteDir, os.DirFS(localDir))
}

// CopyFrom copies a file or a folder of the machine to localPath.
func (f *folder) CopyFrom(ctx context.Context, remotePath, localPath string) error {
	st, err := os.Stat(remotePath)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return os.CopyFS(localPath, os.DirFS(remotePath))
	}
	src, err := os.Open(remotePath)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(localPath), 0o755); err != nil {
		return err
	}
	dst, err := os.OpenFile(localPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
