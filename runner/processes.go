package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/internal/ground/proctree"
)

// ProcessesDefinition is the processes runner: each shard is a child
// `mst collect` in a folder of its own on this machine, reached through the
// same channel operations as a remote machine, so the whole protocol runs
// without containers.
func ProcessesDefinition() *Definition {
	return &Definition{
		Name:        "processes",
		Description: "Runs each shard as a child mst process in its own folder on this machine.",
		OS:          runtime.GOOS,
		Options: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{
  "dir": {"type":"string","description":"Folder that holds the shards' folders (default: a new temporary folder)."}
}}`),
		// A shard is a worker process and its servers and client, which
		// mostly wait on a model: memory bounds them, not cores.
		MaxShards: MachineShards(4*runtime.NumCPU(), 256<<20, ""),
		// The shard folders in a folder the user gave (dir) are found
		// here; those in a temporary folder, by mst runner cleanup's
		// search of the temporary folder.
		Leftovers: func(ctx context.Context, options map[string]string, runID string) ([]Leftover, error) {
			dir := options["dir"]
			if dir == "" {
				return nil, nil
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil, nil
				}
				return nil, err
			}
			var out []Leftover
			for _, e := range entries {
				// A detached run's coordinator folder in dir (see
				// processesCoordinator), whose coordinator has ended.
				if e.IsDir() && strings.HasPrefix(e.Name(), "coordinator-") {
					if l, ok := folderLeftover(filepath.Join(dir, e.Name()), "a detached run's coordinator folder (processes runner)", runID); ok {
						out = append(out, l)
					}
					continue
				}
				if e.IsDir() && strings.HasPrefix(e.Name(), "shard-") {
					if l, ok := folderLeftover(filepath.Join(dir, e.Name()), "a processes runner's shard folder", runID); ok {
						if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "shard-")); err == nil {
							l.Shard = n
						}
						out = append(out, l)
					}
				}
			}
			return out, nil
		},
		Remove: func(ctx context.Context, options map[string]string, l Leftover) error {
			return RemoveFolder(ctx, l)
		},
		ThisMachine: true,
		Coordinator: processesCoordinator,
		New: func(ctx context.Context, p Params) (Runner, error) {
			if len(p.MST) == 0 {
				return nil, errors.New("processes runner: no mst command to start workers with")
			}
			root := p.Options["dir"]
			owned := false
			if root == "" {
				var err error
				if root, err = TempFolder("mst-shards-", ""); err != nil {
					return nil, err
				}
				owned = true
			}
			pr := &processes{root: root, owned: owned, mst: p.MST, grace: p.Grace()}
			pr.Runner = MachineRunner(pr.create, p)
			return pr, nil
		},
	}
}

type processes struct {
	Runner
	root  string
	owned bool
	// run is the run's id, set by the first RunShard.
	run   string
	mst   []string
	grace time.Duration
	mark  sync.Once
}

// RunShard marks a root folder the runner made as the run's, for `mst
// runner cleanup`, and runs the shard.
func (p *processes) RunShard(ctx context.Context, s Shard) (ShardReport, error) {
	p.mark.Do(func() {
		p.run = s.Run
		if p.owned {
			MarkFolder(p.root, s.Run)
		}
	})
	return p.Runner.RunShard(ctx, s)
}

func (p *processes) create(ctx context.Context, i int) (Machine, error) {
	dir := filepath.Join(p.root, "shard-"+strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if !p.owned {
		// Two runs given the same dir would share shard folders, and one
		// would delete the other's: the second is refused.
		if o, err := proctree.ReadOwner(dir); err == nil && o.Alive() && (o.Run != p.run || o.PID != os.Getpid()) {
			return nil, fmt.Errorf("processes runner: %s is in use by run %s (process %d): give each run its own dir, or leave dir unset for a new temporary folder", dir, o.Run, o.PID)
		}
		// In the user's folder, each shard folder is marked, never the
		// folder itself: cleanup may remove what MST made, nothing else.
		if err := MarkFolder(dir, p.run); err != nil {
			return nil, err
		}
	}
	return &folder{dir: dir, mst: p.mst, grace: p.grace}, nil
}

// Close removes the shards' root folder when the runner made it and it
// is empty (kept machines keep it).
func (p *processes) Close() error {
	if p.owned {
		if entries, err := os.ReadDir(p.root); err == nil && len(entries) == 1 && entries[0].Name() == ownerFile {
			os.Remove(filepath.Join(p.root, ownerFile))
		}
		os.Remove(p.root)
	}
	return nil
}

// folder is a "machine" that is a folder on this machine.
type folder struct {
	dir string
	mst []string
	// grace is how long a child gets between SIGTERM and SIGKILL.
	grace time.Duration
}

func (f *folder) ID() string      { return f.dir }
func (f *folder) WorkDir() string { return f.dir }
func (f *folder) MST() []string   { return f.mst }
func (f *folder) Image() string   { return "" }

func (f *folder) Remove(ctx context.Context) error { return os.RemoveAll(f.dir) }

// CopiesCheaply: copying out of a folder of this machine is a file copy.
func (f *folder) CopiesCheaply() bool { return true }

// Exec runs argv as a child process in the folder. Its first element is the
// program; the child sees "mst" as its name. When ctx ends the child is
// stopped in steps: SIGTERM, then SIGKILL after the runner's stop grace.
//
// Exec returns when the child exits, even while stdin is still open: the
// coordinator keeps a worker's stdin open for the whole shard, and a worker
// that died must be noticed at once. So stdin is fed by a goroutine of its
// own rather than by os/exec, whose Wait would wait for its copier, blocked
// on a read that only ends with the shard.
func (f *folder) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Args[0] = "mst"
	cmd.Dir = f.dir
	cmd.Env = workerEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A process group of its own: a Ctrl-C at the terminal reaches only
	// the coordinator, which passes it on as a cancel message. A stop
	// reaches the whole group, and whatever is left of it once the worker
	// has exited is killed. On Linux the worker also gets SIGTERM when
	// this process dies, however it dies, and then stops its servers.
	proctree.Group(cmd)
	proctree.DieWithParent(cmd, syscall.SIGTERM)
	cmd.Cancel = func() error {
		err := cmd.Process.Signal(syscall.SIGTERM)
		proctree.KillGroup(cmd.Process.Pid, syscall.SIGTERM)
		return err
	}
	cmd.WaitDelay = f.grace
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		// Wait closes in once the child has exited; the copy then ends at
		// its next write, or when stdin ends.
		if stdin != nil {
			io.Copy(in, stdin)
		}
		in.Close()
	}()
	err = cmd.Wait()
	// The group's id is not reused while any process of it lives.
	proctree.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
	return err
}

// workerKeeps are the variables of the coordinator's environment a worker
// of the processes runner gets; the rest (keys in the user's shell above
// all) stays behind. A worker needs only these: it gets its secrets from
// the coordinator's tokens message, and its clients and servers get their
// own minimal environments. The proxy variables are kept so that a worker
// reaches a provider the way the coordinator would.
var workerKeeps = []string{
	"PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "SHELL", "TZ", "LANG", "LANGUAGE",
	"XDG_RUNTIME_DIR", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"GOCOVERDIR", "SYSTEMROOT",
}

// workerEnv is the part of env (KEY=value pairs) a worker gets:
// workerKeeps, the cloud chains' CloudChainVars (a worker may write into
// the run's bucket), the locale (LC_*) and MST's own variables (MST_*,
// test hooks among them).
func workerEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(workerKeeps, k) || slices.Contains(CloudChainVars, k) || strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, "MST_") {
			out = append(out, kv)
		}
	}
	return out
}

func (f *folder) CopyTo(ctx context.Context, localDir, remoteDir string) error {
	return copyTree(localDir, remoteDir)
}

// CopyFrom copies out of the shard's folder only, and never follows a
// link the worker left there (see copyOut).
func (f *folder) CopyFrom(ctx context.Context, remotePath, localPath string) error {
	return copyOut(f.dir, remotePath, localPath)
}

// copyTree copies a file, or a folder and everything in it.
func copyTree(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return copyFile(src, dst, st.Mode().Perm())
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return copyFile(p, target, info.Mode().Perm())
	})
}

// copyFile copies one file through a temporary name, so a reader never
// sees half of it.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := atomicfile.WriteFrom(dst, in, perm); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return nil
}

// processesCoordinator makes a detached run's coordinator "machine": a
// folder of this machine (in dir, or the temporary folder), marked with
// the detached run's id for mst runner cleanup. The coordinator is a
// process of this machine, in a session of its own; it runs as the user
// who typed the command, with the environment a worker gets (no keys).
// Finish removes the folder. Nothing outlives the coordinator's own
// deadline here but the folder, which cleanup finds.
func processesCoordinator(ctx context.Context, p CoordinatorParams) (CoordinatorMachine, error) {
	if len(p.MST) == 0 {
		return nil, errors.New("processes runner: no mst command to start the coordinator with")
	}
	var dir string
	var err error
	if root := p.Options["dir"]; root != "" {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, err
		}
		dir, err = os.MkdirTemp(root, "coordinator-")
		if err == nil {
			err = MarkFolder(dir, p.ID)
		}
	} else {
		dir, err = TempFolder("mst-coordinator-", p.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("processes runner: making the coordinator's folder: %w", err)
	}
	return &coordinatorFolder{folder: folder{dir: dir, mst: p.MST, grace: DefaultStopGrace}}, nil
}

type coordinatorFolder struct{ folder }

func (c *coordinatorFolder) Env() []string    { return nil }
func (c *coordinatorFolder) Finish() []string { return []string{"rm", "-rf", c.dir} }
func (c *coordinatorFolder) Identity() string {
	return "a process of this machine, as the user who ran mst"
}
func (c *coordinatorFolder) Dispose(ctx context.Context) error { return os.RemoveAll(c.dir) }
