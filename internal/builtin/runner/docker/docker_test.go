package docker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/runner/docker"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
)

// testVersion is the MST version of the mst binary these tests build and
// put in their worker image, mst-worker:0.0.0-dockertest. It differs from
// every other package's, so tests of several packages running at once on
// one Docker host never rebuild each other's image.
const testVersion = "0.0.0-dockertest"

// busyboxImage is the worker image with a static busybox added, for the
// Machine checks, which need sh, cat and sleep.
const busyboxImage = "mst-worker-busybox:" + testVersion

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Clean()
	os.Exit(code)
}

// needDocker fails the test under CI and skips it elsewhere when no Docker
// daemon answers.
func needDocker(t *testing.T) {
	t.Helper()
	daemon.once.Do(func() {
		daemon.err = docker.DockerAnswers(context.Background())
	})
	if daemon.err != nil {
		msg := fmt.Sprintf("no Docker to test with (start one with scripts/dockerd start and export the DOCKER_HOST it prints): %v", daemon.err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

var daemon struct {
	once sync.Once
	err  error
}

// built holds the static binaries and images the tests share, made once.
var built struct {
	once sync.Once
	err  error
	dir  string
	// mst is a static mst reporting testVersion; server is a static
	// internal/testkit/testserver.
	mst, server string
	// busybox says whether busyboxImage was built: it needs a static
	// busybox on this machine.
	busybox string
}

// workerImage builds the static binaries and the worker image (through
// Setup) once, and returns the paths of mst and of the test MCP server.
func workerImage(t *testing.T) (mst, server string) {
	t.Helper()
	needDocker(t)
	built.once.Do(func() {
		if built.dir, built.err = testbin.Build(testbin.Options{Version: testVersion, Static: true}, testbin.MST, testbin.TestServer); built.err != nil {
			return
		}
		built.mst, built.server = testbin.Path(built.dir, testbin.MST), testbin.Path(built.dir, testbin.TestServer)
		var out bytes.Buffer
		if err := docker.Setup(context.Background(), runner.SetupParams{MST: built.mst, Out: &out}); err != nil {
			built.err = fmt.Errorf("Setup: %w", err)
			return
		}
		if !strings.Contains(out.String(), "built "+docker.DefaultImage(testVersion)) {
			built.err = fmt.Errorf("Setup printed %q, want it to name %s", out.String(), docker.DefaultImage(testVersion))
			return
		}
		built.busybox = buildBusybox()
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.mst, built.server
}

// buildBusybox adds a static busybox to the worker image, and returns why
// it could not ("" when it did).
func buildBusybox() string {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "busybox is not installed (Debian: apt-get install busybox-static)"
	}
	if bb, _ = filepath.EvalSymlinks(bb); docker.CheckStatic(bb, runtime.GOARCH) != nil {
		return bb + " is not a static busybox (Debian: apt-get install busybox-static)"
	}
	dir, err := os.MkdirTemp("", "mst-busybox-image-")
	if err != nil {
		return err.Error()
	}
	defer os.RemoveAll(dir)
	if b, err := os.ReadFile(bb); err != nil {
		return err.Error()
	} else if err := os.WriteFile(filepath.Join(dir, "busybox"), b, 0o755); err != nil {
		return err.Error()
	}
	df := "FROM " + docker.DefaultImage(testVersion) + "\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err.Error()
	}
	if out, err := exec.Command("docker", "build", "--quiet", "--tag", busyboxImage, dir).CombinedOutput(); err != nil {
		return fmt.Sprintf("building %s: %v\n%s", busyboxImage, err, out)
	}
	return ""
}

// TestConformance runs the runner conformance suite on the docker runner,
// two shards at once, each in its own container.
func TestConformance(t *testing.T) {
	t.Parallel()
	mst, server := workerImage(t)
	t.Cleanup(func() { noContainersOf(t, "runnertest-transcripts", "runnertest-cancel", "runnertest-ready") })
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p runner.Params) (runner.Runner, error) {
			p.MST = []string{mst}
			return docker.New(t.Context(), p)
		},
		MSTVersion: testVersion,
		Shards:     2,
		Server:     []string{server},
	})
}

// TestMachine runs the Machine checks on containers of the worker image
// with busybox added.
func TestMachine(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	needBusybox(t)
	run := "machinetest-" + docker.RandomHex(4)
	t.Cleanup(func() { noContainersOf(t, run) })
	// Each check gets a shard of its own, so the checks' containers, which
	// run at once, never share a name.
	var shards atomic.Int32
	runnertest.RunMachine(t, func(t *testing.T) runner.Machine {
		r, err := docker.New(t.Context(), runner.Params{
			Options: map[string]string{docker.OptionImage: busyboxImage}, MST: []string{mst},
			MSTVersion: testVersion, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		m, err := docker.CreateContainer(t.Context(), r, run, int(shards.Add(1)))
		if err != nil {
			t.Fatalf("creating a container: %v", err)
		}
		if got, want := m.Image(), busyboxImage+"@sha256:"; !strings.HasPrefix(got, want) {
			t.Errorf("Image() = %q, want %s…", got, want)
		}
		return m
	})
}

// TestNewWithoutImage checks the error that tells the user to run setup.
func TestNewWithoutImage(t *testing.T) {
	t.Parallel()
	needDocker(t)
	_, err := docker.New(t.Context(), runner.Params{MSTVersion: "0.0.0-never-built"})
	if err == nil || !strings.Contains(err.Error(), "mst runner setup docker") {
		t.Errorf("New with no worker image = %v, want an error naming mst runner setup docker", err)
	}
	_, err = docker.New(t.Context(), runner.Params{Options: map[string]string{docker.OptionImage: "acme/no-such-image:1"}})
	if err == nil || !strings.Contains(err.Error(), "docker pull") {
		t.Errorf("New with a missing image=REF = %v, want an error saying to pull it", err)
	}
}

// TestLeftovers keeps a container, finds it by its run and removes it.
func TestLeftovers(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	run := "leftovertest-" + docker.RandomHex(4)
	r, err := docker.New(t.Context(), runner.Params{MST: []string{mst}, MSTVersion: testVersion})
	if err != nil {
		t.Fatal(err)
	}
	m, err := docker.CreateContainer(t.Context(), r, run, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Remove(context.WithoutCancel(t.Context()))
	list, err := docker.Leftovers(t.Context(), nil, run)
	if err != nil {
		t.Fatalf("Leftovers = %v", err)
	}
	if len(list) != 1 || list[0].ID != m.ID() || list[0].Run != run || list[0].Shard != 2 || !strings.HasPrefix(list[0].Detail, "Up") {
		t.Fatalf("Leftovers(%s) = %+v, want the one running container %s of shard 2", run, list, m.ID())
	}
	all, err := docker.Leftovers(t.Context(), nil, "")
	if err != nil || !containsID(all, m.ID()) {
		t.Errorf("Leftovers of every run = %+v, %v; want it to hold %s", all, err, m.ID())
	}
	if err := docker.Remove(t.Context(), nil, list[0]); err != nil {
		t.Fatalf("Remove = %v", err)
	}
	if err := docker.Remove(t.Context(), nil, list[0]); err != nil {
		t.Errorf("Remove of a container that is gone = %v, want nil", err)
	}
	noContainersOf(t, run)
}

func containsID(list []runner.Leftover, id string) bool {
	for _, l := range list {
		if l.ID == id {
			return true
		}
	}
	return false
}

// noContainersOf fails the test when a container of one of the runs is
// left on the Docker host, and removes it.
func noContainersOf(t *testing.T, runs ...string) {
	t.Helper()
	ctx := context.Background()
	for _, run := range runs {
		list, err := docker.Leftovers(ctx, nil, run)
		if err != nil {
			t.Errorf("listing the containers of %s: %v", run, err)
			continue
		}
		for _, l := range list {
			t.Errorf("container %s (%s) of run %s is left behind", l.ID, l.Detail, run)
			docker.Remove(ctx, nil, l)
		}
	}
}

// TestExecStopsTheCommand checks that a command whose Exec context ends
// is stopped inside the container, not only its docker CLI: a command
// that ignores SIGTERM is killed after the grace period.
func TestExecStopsTheCommand(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	needBusybox(t)
	run := "stoptest-" + docker.RandomHex(4)
	r, err := docker.New(t.Context(), runner.Params{
		Options: map[string]string{docker.OptionImage: busyboxImage}, MST: []string{mst},
		MSTVersion: testVersion, StopGrace: runnertest.StopGrace,
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := docker.CreateContainer(t.Context(), r, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		m.Remove(context.WithoutCancel(t.Context()))
		noContainersOf(t, run)
	}()
	for _, script := range []string{"echo started; exec sleep 3600", "trap '' TERM; echo started; while :; do sleep 1; done"} {
		ctx, cancel := context.WithCancel(t.Context())
		stdout := &firstWrite{fn: cancel}
		if err := m.Exec(ctx, []string{"sh", "-c", script}, strings.NewReader(""), stdout, &bytes.Buffer{}); err == nil {
			t.Errorf("Exec(%q) stopped by its context = nil, want an error", script)
		}
		cancel()
		var ps bytes.Buffer
		list := "for p in /proc/[0-9]*; do cat $p/cmdline | tr '\\0' ' '; echo; done"
		if err := m.Exec(t.Context(), []string{"sh", "-c", list}, strings.NewReader(""), &ps, &bytes.Buffer{}); err != nil {
			t.Fatalf("listing the container's processes: %v", err)
		}
		if strings.Contains(ps.String(), "sleep") {
			t.Errorf("after Exec(%q) was stopped, the container still runs:\n%s", script, ps.String())
		}
	}
}

// firstWrite calls fn at the first write.
type firstWrite struct {
	once sync.Once
	fn   func()
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(w.fn)
	return len(p), nil
}

// needBusybox stops t when the busybox image could not be built: a failure
// under CI, a skip that says why elsewhere.
func needBusybox(t *testing.T) {
	t.Helper()
	if built.busybox == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(built.busybox)
	}
	t.Skip(built.busybox)
}
