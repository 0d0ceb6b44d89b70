//go:build linux

// The coordinator's mounts are computed from this machine's Linux
// programs (ELF files, the loader's search folders).

package docker

import (
	"bufio"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/runner"
)

// CreateCoordinatorWithCLI is CreateCoordinator with the program bin
// mounted into the container as its docker CLI, for the tests of package
// docker_test.
func CreateCoordinatorWithCLI(ctx context.Context, p runner.CoordinatorParams, bin string) (runner.CoordinatorMachine, error) {
	c, err := findCLI()
	if err != nil {
		return nil, err
	}
	return createCoordinator(ctx, p, c, bin)
}

// CoordinatorName is coordinatorName, for tests.
var CoordinatorName = coordinatorName

// CLIMounts is cliMounts, as "source>target" strings with ",ro" for a
// read-only mount, for tests.
func CLIMounts(bin, arch string) ([]string, error) {
	ms, err := cliMounts(bin, arch)
	var out []string
	for _, m := range ms {
		s := m.source + ">" + m.target
		if m.readonly {
			s += ",ro"
		}
		out = append(out, s)
	}
	return out, err
}

func TestCoordinatorArgs(t *testing.T) {
	t.Parallel()
	base := func() coordinatorSpec {
		return coordinatorSpec{
			name: "mst-coordinator-d1", id: "d1", version: "1.2.3", image: "sha256:abc",
			set:      settings{mst: "/mst", workDir: "/work", mounts: true},
			endpoint: endpoint{host: "unix:///run/d.sock", socket: "/run/d.sock"},
			path:     "/usr/local/bin:/usr/bin:/bin",
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*coordinatorSpec)
		// want are runs of arguments the command line must hold, in order;
		// never are arguments it must not hold.
		want  [][]string
		never []string
	}{
		{
			name: "defaults",
			edit: func(*coordinatorSpec) {},
			want: [][]string{
				{"run", "--detach", "--rm", "--name", "mst-coordinator-d1"},
				{"--label", "mst.coordinator=d1", "--label", "mst.version=1.2.3"},
				{"--env", "DOCKER_HOST=unix:///run/d.sock", "--env", "PATH=/usr/local/bin:/usr/bin:/bin"},
				{"--entrypoint", "/mst", "sha256:abc", "runner", "idle", "--deadline", runner.DefaultCoordinatorDeadline.String()},
			},
			never: []string{"--network", "--user"},
		},
		{
			name: "a desktop image's coordinator runs as root, who reaches the socket",
			edit: func(s *coordinatorSpec) { s.user = "root" },
			want: [][]string{{"--user", "root"}},
		},
		{
			name: "deadline, network and another mst",
			edit: func(s *coordinatorSpec) {
				s.deadline = 90 * time.Second
				s.set.network = "host"
				s.set.mst = "/usr/local/bin/mst"
			},
			want: [][]string{
				{"--network", "host"},
				{"--entrypoint", "/usr/local/bin/mst", "sha256:abc", "runner", "idle", "--deadline", "1m30s"},
			},
		},
		{
			name: "cloud chain variables by name",
			edit: func(s *coordinatorSpec) { s.envNames = []string{"STORAGE_EMULATOR_HOST", "AWS_PROFILE"} },
			want: [][]string{{"--env", "STORAGE_EMULATOR_HOST", "--env", "AWS_PROFILE"}},
		},
		{
			name: "mounts, each target once",
			edit: func(s *coordinatorSpec) {
				s.mounts = []mount{
					{source: "/usr/bin/docker", target: CoordinatorCLI, readonly: true},
					{source: "/run/d.sock", target: "/run/d.sock"},
					{source: "/srv/eval", target: "/srv/eval", readonly: true},
					{source: "/elsewhere", target: "/srv/eval", readonly: true},
				}
			},
			want: [][]string{{
				"--mount", "type=bind,source=/usr/bin/docker,target=/usr/local/bin/docker,readonly",
				"--mount", "type=bind,source=/run/d.sock,target=/run/d.sock",
				"--mount", "type=bind,source=/srv/eval,target=/srv/eval,readonly",
				"--entrypoint",
			}},
			never: []string{"type=bind,source=/elsewhere,target=/srv/eval,readonly"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(&s)
			args := s.args()
			for _, run := range tc.want {
				if !containsRun(args, run) {
					t.Errorf("args = %q\nwant them to hold %q", args, run)
				}
			}
			for _, a := range tc.never {
				if slices.Contains(args, a) {
					t.Errorf("args = %q\nwant no %q", args, a)
				}
			}
			for i, a := range args {
				if a == "--env" && i+1 < len(args) && slices.Contains(s.envNames, strings.SplitN(args[i+1], "=", 2)[0]) && strings.Contains(args[i+1], "=") {
					t.Errorf("args pass %q with its value; want the name alone", args[i+1])
				}
			}
		})
	}
}

// containsRun reports whether run appears in args as consecutive
// arguments.
func containsRun(args, run []string) bool {
	for i := 0; i+len(run) <= len(args); i++ {
		if slices.Equal(args[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	certs := t.TempDir()
	for _, tc := range []struct {
		host, certs string
		want        endpoint
		err         string
	}{
		{host: "", want: endpoint{host: "unix:///var/run/docker.sock", socket: "/var/run/docker.sock"}},
		{host: "unix:///tmp/mst-dockerd/docker.sock", want: endpoint{host: "unix:///tmp/mst-dockerd/docker.sock", socket: "/tmp/mst-dockerd/docker.sock"}},
		{host: "unix:///run//d.sock", want: endpoint{host: "unix:///run//d.sock", socket: "/run/d.sock"}},
		{host: "unix://docker.sock", err: "absolute path"},
		{host: "tcp://10.0.0.5:2376", want: endpoint{host: "tcp://10.0.0.5:2376"}},
		{host: "tcp://10.0.0.5:2376", certs: certs, want: endpoint{host: "tcp://10.0.0.5:2376", certs: certs}},
		{host: "tcp://10.0.0.5:2376", certs: filepath.Join(certs, "missing"), want: endpoint{host: "tcp://10.0.0.5:2376"}},
		{host: "ssh://me@host", err: "tcp://HOST:PORT"},
		{host: "npipe:////./pipe/docker_engine", err: "unix socket"},
	} {
		got, err := parseEndpoint(tc.host, tc.certs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.host) {
				t.Errorf("parseEndpoint(%q) = %+v, %v; want an error naming it and saying %q", tc.host, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseEndpoint(%q, %q) = %+v, %v; want %+v", tc.host, tc.certs, got, err, tc.want)
		}
	}
}

func TestEndpointMounts(t *testing.T) {
	t.Parallel()
	if got := (endpoint{host: "unix:///s", socket: "/s"}).mounts(); !slices.Equal(got, []mount{{source: "/s", target: "/s"}}) {
		t.Errorf("a socket's mounts = %+v, want the socket read-write at its path", got)
	}
	if got := (endpoint{host: "tcp://h:1", certs: "/c"}).mounts(); !slices.Equal(got, []mount{{source: "/c", target: "/c", readonly: true}}) {
		t.Errorf("a tcp daemon's mounts with certificates = %+v, want them read-only", got)
	}
	if got := (endpoint{host: "tcp://h:1"}).mounts(); len(got) != 0 {
		t.Errorf("a tcp daemon's mounts = %+v, want none", got)
	}
}

func TestCoordinatorName(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"20261201-1340-abcdef": "mst-coordinator-20261201-1340-abcdef",
		"a/b c:d":              "mst-coordinator-a-b-c-d",
	} {
		if got := coordinatorName(id); got != want {
			t.Errorf("coordinatorName(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestWithLocalBin(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"":                         "/usr/local/bin:/usr/bin:/bin",
		"/usr/bin:/bin":            "/usr/local/bin:/usr/bin:/bin",
		"/opt/x:/usr/local/bin:/b": "/opt/x:/usr/local/bin:/b",
	} {
		if got := withLocalBin(p); got != want {
			t.Errorf("withLocalBin(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestConfLibDirs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"ld.so.conf":            "# top\ninclude conf.d/*.conf\n/opt/top/lib  # trailing\nrelative/ignored\n",
		"conf.d/b.conf":         "/usr/lib/b\n",
		"conf.d/a.conf":         "/usr/local/lib\n\ninclude " + filepath.Join(dir, "deeper.conf") + "\n",
		"conf.d/not-included.x": "/never\n",
		"deeper.conf":           "/deep//lib/\n",
	})
	got := confLibDirs(filepath.Join(dir, "ld.so.conf"), 0)
	want := []string{"/usr/local/lib", "/deep/lib", "/usr/lib/b", "/opt/top/lib"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("confLibDirs (-want +got):\n%s", diff)
	}
	if got := confLibDirs(filepath.Join(dir, "missing.conf"), 0); len(got) != 0 {
		t.Errorf("confLibDirs of a missing file = %q, want none", got)
	}
}

// staticProgram builds a static Go program and returns its path.
func staticProgram(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.go": "package main\n\nfunc main() {}\n", "go.mod": "module static\n\ngo 1.21\n"})
	bin := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a static program: %v\n%s", err, out)
	}
	return bin
}

// TestCLIMountsStatic: a static CLI is mounted alone, read-only, at
// CoordinatorCLI.
func TestCLIMountsStatic(t *testing.T) {
	t.Parallel()
	bin := staticProgram(t)
	got, err := CLIMounts(bin, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{bin + ">" + CoordinatorCLI + ",ro"}; !slices.Equal(got, want) {
		t.Errorf("cliMounts(a static program) = %q, want %q", got, want)
	}
	if _, err := CLIMounts(bin, otherArch()); err == nil || !strings.Contains(err.Error(), "architecture") {
		t.Errorf("cliMounts for another architecture = %v, want an error saying so", err)
	}
	script := filepath.Join(t.TempDir(), "docker")
	os.WriteFile(script, []byte("#!/bin/sh\nexec true\n"), 0o755)
	if _, err := CLIMounts(script, runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "not a Linux program") {
		t.Errorf("cliMounts of a script = %v, want an error saying it is not a Linux program", err)
	}
}

func otherArch() string {
	if runtime.GOARCH == "amd64" {
		return "arm64"
	}
	return "amd64"
}

// TestCLIMountsDynamic checks, for every dynamically linked program at
// hand, that the mounts are the program, its interpreter and the very
// libraries ldd says it loads.
func TestCLIMountsDynamic(t *testing.T) {
	t.Parallel()
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		testneed.Missing(t, "ldd is not installed (Debian: libc-bin)")
	}
	var tried int
	for _, bin := range []string{"/bin/ls", "/bin/sh", "/usr/bin/docker", "/usr/bin/env", "/usr/bin/git", "/usr/bin/ssh"} {
		interp := interpreter(bin)
		if interp == "" {
			continue
		}
		tried++
		t.Run(filepath.Base(bin), func(t *testing.T) {
			got, err := cliMounts(bin, runtime.GOARCH)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) < 2 || got[0] != (mount{source: bin, target: CoordinatorCLI, readonly: true}) || got[1] != (mount{source: interp, target: interp, readonly: true}) {
				t.Fatalf("cliMounts(%s) = %+v, want the program then its interpreter %s first", bin, got, interp)
			}
			var libs []string
			for _, m := range got[2:] {
				if m.source != m.target || !m.readonly {
					t.Errorf("mount %+v: want a library read-only at its own path", m)
				}
				if m.source != ldCache {
					libs = append(libs, realPath(t, m.source))
				}
			}
			want := lddLibs(t, ldd, bin, interp)
			slices.Sort(libs)
			if diff := cmp.Diff(want, libs); diff != "" {
				t.Errorf("libraries of %s (-ldd +cliMounts):\n%s", bin, diff)
			}
		})
	}
	if tried == 0 {
		testneed.Missing(t, "no dynamically linked program found to test with")
	}
}

// TestElfDepsThroughCache: a library found only in a folder of ld.so.conf
// needs the loader's cache in the container; one in a system folder does
// not.
func TestElfDepsThroughCache(t *testing.T) {
	t.Parallel()
	bin := "/bin/ls"
	if interpreter(bin) == "" {
		testneed.Missing(t, bin+" is not a dynamically linked program")
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deps, err := elfDeps(f, bin, nil)
	if err != nil || deps.needCache || len(deps.libs) == 0 {
		t.Fatalf("elfDeps(%s) without ld.so.conf = %+v, %v; want libraries from the system folders, no cache", bin, deps, err)
	}
	// A copy of the first library in a folder of its own, named by
	// ld.so.conf, is found there first, and then the cache is needed.
	dir := t.TempDir()
	lib := filepath.Join(dir, filepath.Base(deps.libs[0]))
	if b, err := os.ReadFile(deps.libs[0]); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(lib, b, 0o644); err != nil {
		t.Fatal(err)
	}
	deps, err = elfDeps(f, bin, []string{dir})
	if err != nil || !deps.needCache || !slices.Contains(deps.libs, lib) {
		t.Fatalf("elfDeps(%s) with %s first = %+v, %v; want %s found there, and the cache", bin, dir, deps, err, lib)
	}
}

// interpreter is bin's ELF interpreter, "" when it has none or is not a
// program here.
func interpreter(bin string) string {
	f, err := elf.Open(bin)
	if err != nil {
		return ""
	}
	defer f.Close()
	d, err := elfDeps(f, bin, nil)
	if err != nil {
		return ""
	}
	return d.interp
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return r
}

// lddLibs are the libraries ldd says bin loads, by real path, without the
// vDSO and the interpreter.
func lddLibs(t *testing.T, ldd, bin, interp string) []string {
	t.Helper()
	out, err := exec.Command(ldd, bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bin, err)
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		_, p, ok := strings.Cut(sc.Text(), "=> ")
		if !ok {
			continue
		}
		p, _, _ = strings.Cut(p, " (")
		if p = strings.TrimSpace(p); p == "" || realPath(t, p) == realPath(t, interp) {
			continue
		}
		libs = append(libs, realPath(t, p))
	}
	slices.Sort(libs)
	return libs
}
