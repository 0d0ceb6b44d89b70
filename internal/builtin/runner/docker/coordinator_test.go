package docker_test

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/builtin/runner/docker"
	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/runner"
)

// coordinatorParams are the params of a coordinator container of the test
// image, with id fresh.
func coordinatorParams(t *testing.T, mst string, options map[string]string) runner.CoordinatorParams {
	t.Helper()
	return runner.CoordinatorParams{
		Options: options, ID: "coordtest-" + docker.RandomHex(4), Deadline: time.Hour,
		MST: []string{mst}, MSTVersion: testVersion,
	}
}

// newCoordinator creates a coordinator container and removes it when the
// test ends, failing the test if Dispose fails.
func newCoordinator(t *testing.T, p runner.CoordinatorParams, cli string) runner.CoordinatorMachine {
	t.Helper()
	var m runner.CoordinatorMachine
	var err error
	if cli == "" {
		m, err = docker.CreateCoordinator(t.Context(), p)
	} else {
		m, err = docker.CreateCoordinatorWithCLI(t.Context(), p, cli)
	}
	if err != nil {
		t.Fatalf("creating the coordinator container: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Dispose(context.Background()); err != nil {
			t.Errorf("Dispose = %v", err)
		}
	})
	return m
}

// run runs argv in m and returns its stdout; a failure fails the test.
func run(t *testing.T, m runner.Channel, argv ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if err := m.Exec(t.Context(), argv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("Exec(%q) = %v\nstderr: %s", argv, err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// inspect is what the tests read of docker inspect of a container.
type inspect struct {
	Path   string
	Args   []string
	Config struct {
		Cmd        []string
		Entrypoint []string
		Env        []string
		Labels     map[string]string
	}
	HostConfig struct {
		NetworkMode string
		AutoRemove  bool
	}
}

// inspectContainer inspects name; ok is false once it is gone.
func inspectContainer(t *testing.T, name string) (in inspect, ok bool) {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "--type", "container", name).Output()
	if err != nil {
		return in, false
	}
	var list []inspect
	if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
		t.Fatalf("docker inspect %s printed %s: %v", name, out, err)
	}
	return list[0], true
}

// waitGone waits until the container name is removed, polling docker
// inspect, for at most timeout (generous: the daemon is shared).
func waitGone(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	end := time.Now().Add(timeout)
	for {
		if _, ok := inspectContainer(t, name); !ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the container %s is still there after %s", name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCoordinator checks a coordinator container of the busybox image
// (which has sh and cat): it runs mst, reaches the Docker daemon, takes a
// folder and gives it back, sees the eval's files read-only, gets the
// cloud chain variables without their values in its argv, and removes
// itself with Finish. It sets a variable of the process's environment,
// so it does not run in parallel.
func TestCoordinator(t *testing.T) {
	mst, _ := workerImage(t)
	needBusybox(t)
	const canary = "canary-session-4f1d"
	t.Setenv("AWS_ROLE_SESSION_NAME", canary)
	eval := t.TempDir()
	writeFile(t, filepath.Join(eval, "eval.yaml"), "cases: []\n")
	p := coordinatorParams(t, mst, map[string]string{docker.OptionImage: busyboxImage, docker.OptionNetwork: "host"})
	p.HostPaths = runner.HostPaths{ConfigDir: eval, Dirs: []string{eval}}
	m := newCoordinator(t, p, "")
	name := docker.CoordinatorName(p.ID)
	if m.ID() != name {
		t.Errorf("ID() = %q, want %q", m.ID(), name)
	}

	t.Run("container", func(t *testing.T) {
		in, ok := inspectContainer(t, name)
		if !ok {
			t.Fatalf("no container %s", name)
		}
		if in.Config.Labels[docker.LabelCoordinator] != p.ID || in.Config.Labels[docker.LabelVersion] != testVersion {
			t.Errorf("labels = %v, want %s=%s and %s=%s", in.Config.Labels, docker.LabelCoordinator, p.ID, docker.LabelVersion, testVersion)
		}
		if !in.HostConfig.AutoRemove || in.HostConfig.NetworkMode != "host" {
			t.Errorf("host config = %+v, want --rm and the host network", in.HostConfig)
		}
		if want := []string{"runner", "idle", "--deadline", "1h0m0s"}; !slices.Equal(in.Args, want) {
			t.Errorf("main process %s %q, want mst %q", in.Path, in.Args, want)
		}
		if !slices.Contains(in.Config.Env, "AWS_ROLE_SESSION_NAME="+canary) {
			t.Errorf("the container's environment %q lacks the cloud chain variable set here", in.Config.Env)
		}
		for _, a := range slices.Concat([]string{in.Path}, in.Args, in.Config.Cmd, in.Config.Entrypoint) {
			if strings.Contains(a, canary) {
				t.Errorf("the container's recorded command line holds the variable's value: %q", a)
			}
		}
	})

	t.Run("env", func(t *testing.T) {
		env := m.Env()
		if want := "DOCKER_HOST=" + dockerHost(t); !slices.Contains(env, want) {
			t.Errorf("Env() = %q, want %s", env, want)
		}
		if !slices.ContainsFunc(env, func(kv string) bool {
			v, ok := strings.CutPrefix(kv, "PATH=")
			return ok && slices.Contains(strings.Split(v, ":"), "/usr/local/bin")
		}) {
			t.Errorf("Env() = %q, want a PATH with /usr/local/bin", env)
		}
		// Seen inside by a command that is not started through Exec,
		// which passes the cloud chain variables on itself.
		out, err := exec.Command("docker", "exec", name, "sh", "-c", "echo $AWS_ROLE_SESSION_NAME $DOCKER_HOST").Output()
		if got, want := strings.TrimSpace(string(out)), canary+" "+dockerHost(t); err != nil || got != want {
			t.Errorf("inside, the variables are %q (%v), want %q", got, err, want)
		}
		if id := m.Identity(); !strings.Contains(id, name) || !strings.Contains(id, "socket") || !strings.Contains(id, "any container") {
			t.Errorf("Identity() = %q, want it to name the container, the socket and what it can do", id)
		}
	})

	t.Run("mst", func(t *testing.T) {
		if got := run(t, m, append(m.MST(), "version")...); got != "mst "+testVersion {
			t.Errorf("mst version in the coordinator = %q, want mst %s", got, testVersion)
		}
	})

	t.Run("docker", func(t *testing.T) {
		got := run(t, m, "docker", "ps", "--filter", "name=^"+name+"$", "--format", "{{.Names}}")
		if got != name {
			t.Errorf("docker ps inside printed %q, want the coordinator's own container %s", got, name)
		}
	})

	t.Run("copy", func(t *testing.T) {
		src := t.TempDir()
		files := map[string]string{"detach.json": `{"id":"x"}`, "eval/eval.yaml": "cases: []\n"}
		for n, body := range files {
			writeFile(t, filepath.Join(src, n), body)
		}
		remote := m.WorkDir() + "/detached/" + p.ID
		if err := m.CopyTo(t.Context(), src, remote); err != nil {
			t.Fatalf("CopyTo = %v", err)
		}
		if got := run(t, m, "cat", remote+"/eval/eval.yaml"); got != strings.TrimSpace(files["eval/eval.yaml"]) {
			t.Errorf("the copied file reads %q inside", got)
		}
		back := filepath.Join(t.TempDir(), "back")
		if err := m.CopyFrom(t.Context(), remote, back); err != nil {
			t.Fatalf("CopyFrom = %v", err)
		}
		got := map[string]string{}
		for n := range files {
			b, err := os.ReadFile(filepath.Join(back, n))
			if err != nil {
				t.Fatal(err)
			}
			got[n] = string(b)
		}
		if diff := cmp.Diff(files, got); diff != "" {
			t.Errorf("the folder copied back (-want +got):\n%s", diff)
		}
	})

	t.Run("host paths", func(t *testing.T) {
		file := filepath.Join(eval, "eval.yaml")
		if got := run(t, m, "cat", file); got != "cases: []" {
			t.Errorf("%s reads %q inside, want it as here", file, got)
		}
		var errb bytes.Buffer
		err := m.Exec(t.Context(), []string{"sh", "-c", "echo changed > " + file}, strings.NewReader(""), &bytes.Buffer{}, &errb)
		if err == nil || !strings.Contains(errb.String(), "Read-only") {
			t.Errorf("writing %s inside = %v (%s), want a read-only file system", file, err, errb.String())
		}
	})

	t.Run("leftovers", func(t *testing.T) {
		list, err := docker.Leftovers(t.Context(), nil, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != name || list[0].Run != p.ID || list[0].Shard != -1 || !strings.HasPrefix(list[0].Detail, "coordinator: Up") {
			t.Errorf("Leftovers(%s) = %+v, want the coordinator container %s, shard -1", p.ID, list, name)
		}
		all, err := docker.Leftovers(t.Context(), nil, "")
		if err != nil || !containsID(all, name) {
			t.Errorf("Leftovers of every run = %+v, %v; want it to hold %s", all, err, name)
		}
	})

	t.Run("finish", func(t *testing.T) {
		finish := m.Finish()
		if len(finish) == 0 {
			t.Fatal("Finish() is empty")
		}
		// The command removes the container it runs in, so it may end
		// killed: its error says nothing.
		m.Exec(t.Context(), finish, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
		waitGone(t, name, 2*time.Minute)
	})
}

// TestCoordinatorDispose checks that Dispose removes the coordinator
// container, and that a second Dispose is no error.
func TestCoordinatorDispose(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	p := coordinatorParams(t, mst, nil)
	m := newCoordinator(t, p, "")
	if err := m.Dispose(t.Context()); err != nil {
		t.Fatalf("Dispose = %v", err)
	}
	waitGone(t, m.ID(), 2*time.Minute)
	if err := m.Dispose(t.Context()); err != nil {
		t.Errorf("a second Dispose = %v, want nil", err)
	}
}

// TestCoordinatorDeadline checks that a coordinator container goes away
// by itself at its deadline: its main process ends well (exit code 0, as
// no failure would end it) and the container is removed. It follows the
// container's events from before it is made, so none is missed.
func TestCoordinatorDeadline(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	p := coordinatorParams(t, mst, nil)
	p.Deadline = 3 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	since := strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10)
	events := exec.CommandContext(ctx, "docker", "events", "--since", since, "--filter", "type=container",
		"--filter", "label="+docker.LabelCoordinator+"="+p.ID, "--format", `{{.Action}} {{index .Actor.Attributes "exitCode"}}`)
	stdout, err := events.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		events.Wait()
	}()
	newCoordinator(t, p, "")
	var seen []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seen = append(seen, strings.TrimSpace(sc.Text()))
		if strings.HasPrefix(sc.Text(), "destroy") {
			break
		}
	}
	if !slices.Contains(seen, "die 0") || !slices.Contains(seen, "destroy") {
		t.Fatalf("the coordinator container's events were %q (%v), want it to die with exit code 0 and be destroyed", seen, ctx.Err())
	}
}

// TestCoordinatorDynamicCLI runs dynamically linked programs as the
// coordinator's docker CLI in the scratch worker image: the mounted
// loader and libraries let them start. A dynamic docker CLI (Debian's
// docker.io) reaches the daemon; /bin/ls, standing in for one, lists a
// folder.
func TestCoordinatorDynamicCLI(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	t.Run("ls", func(t *testing.T) {
		t.Parallel()
		if !dynamic("/bin/ls") {
			testneed.Missing(t, "/bin/ls is not linked dynamically")
		}
		m := newCoordinator(t, coordinatorParams(t, mst, nil), "/bin/ls")
		if got := run(t, m, docker.CoordinatorCLI, "/usr/local/bin"); got != "docker" {
			t.Errorf("ls /usr/local/bin in the coordinator printed %q, want docker", got)
		}
	})
	t.Run("docker", func(t *testing.T) {
		t.Parallel()
		cli := dynamicDocker()
		if cli == "" {
			testneed.Missing(t, "no dynamically linked docker CLI here (Debian's docker.io has one at /usr/bin/docker; scripts/test installs it)")
		}
		p := coordinatorParams(t, mst, nil)
		m := newCoordinator(t, p, cli)
		name := docker.CoordinatorName(p.ID)
		if got := run(t, m, "docker", "ps", "--filter", "name=^"+name+"$", "--format", "{{.Names}}"); got != name {
			t.Errorf("docker ps inside printed %q, want %s", got, name)
		}
	})
}

// dynamicDocker is a dynamically linked docker CLI on this machine, or "".
func dynamicDocker() string {
	cands := []string{"/usr/bin/docker"}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		cands = append(cands, filepath.Join(d, "docker"))
	}
	for _, c := range cands {
		if dynamic(c) {
			return c
		}
	}
	return ""
}

func dynamic(bin string) bool {
	f, err := elf.Open(bin)
	if err != nil {
		return false
	}
	defer f.Close()
	return slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
}

// dockerHost is the DOCKER_HOST the docker CLI uses here.
func dockerHost(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}").Output()
	if err != nil {
		t.Fatalf("docker context inspect: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
