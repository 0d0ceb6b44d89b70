package docker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/runner/docker"
	"github.com/mst-eval/mst/runner"
)

// plainImage builds, from scratch, an image with no label at all that
// holds the static mst at /usr/local/bin/mst, and returns its reference
// and id; it is removed when the test ends.
func plainImage(t *testing.T, mst string) (ref, id string) {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(mst)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mst"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	ref = "mst-test/plain-" + docker.RandomHex(4) + ":1"
	build := exec.Command("docker", "build", "--quiet", "--tag", ref, "--file", "-", dir)
	build.Stdin = strings.NewReader("FROM scratch\nCOPY mst /usr/local/bin/mst\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", ref, err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "image", "rm", "--force", ref).Run() })
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}} {{json .Config.Labels}}", ref).Output()
	if err != nil {
		t.Fatal(err)
	}
	id, labels, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if labels != "null" {
		t.Fatalf("%s has the labels %s, want none", ref, labels)
	}
	return ref, id
}

// TestOwnImage runs shards in an image without MST's labels: what counts
// is the mst inside. With the wrong path, or another version than the
// coordinator's, New fails before any container starts and says how to
// fix it; machines record the image pinned by its id.
func TestOwnImage(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	ref, id := plainImage(t, mst)
	run := "ownimagetest-" + docker.RandomHex(4)
	t.Cleanup(func() { noContainersOf(t, run) })
	newRunner := func(options map[string]string, version string) (runner.Runner, error) {
		return docker.New(t.Context(), runner.Params{Options: options, MST: []string{mst}, MSTVersion: version})
	}

	r, err := newRunner(map[string]string{docker.OptionImage: ref, docker.OptionMST: "/usr/local/bin/mst"}, testVersion)
	if err != nil {
		t.Fatalf("New with an unlabelled image holding mst %s = %v, want it to run", testVersion, err)
	}
	m, err := docker.CreateContainer(t.Context(), r, run, 0)
	if err != nil {
		t.Fatalf("creating a container of %s: %v", ref, err)
	}
	if got, want := m.Image(), ref+"@"+id; got != want {
		t.Errorf("Image() = %q, want %q", got, want)
	}
	var out strings.Builder
	if err := m.Exec(t.Context(), []string{"/usr/local/bin/mst", "version"}, strings.NewReader(""), &out, &out); err != nil || strings.TrimSpace(out.String()) != "mst "+testVersion {
		t.Errorf("mst version in the container = %q, %v", out.String(), err)
	}
	if err := m.Remove(context.WithoutCancel(t.Context())); err != nil {
		t.Error(err)
	}

	// No mst at the path: where to put it, and how to name its path.
	_, err = newRunner(map[string]string{docker.OptionImage: ref}, testVersion)
	wantSays(t, "New with no mst at /mst", err, "has no mst at /mst", "--runner-option mst=PATH", "mst runner setup docker", "mst "+testVersion)
	// Another version than the coordinator's: both versions, and the fixes.
	_, err = newRunner(map[string]string{docker.OptionImage: ref, docker.OptionMST: "/usr/local/bin/mst"}, "0.0.0-other")
	wantSays(t, "New with another mst version", err, "holds mst "+testVersion+" at /usr/local/bin/mst", "coordinator is mst 0.0.0-other", "mst runner setup docker", "--runner-option mst=PATH")
	// Setup checks an image of one's own the same way.
	err = docker.Setup(t.Context(), runner.SetupParams{Options: map[string]string{docker.OptionImage: ref}, MSTVersion: testVersion})
	wantSays(t, "Setup with no mst at /mst", err, "has no mst at /mst", "--runner-option mst=PATH")
	var said strings.Builder
	err = docker.Setup(t.Context(), runner.SetupParams{Options: map[string]string{docker.OptionImage: ref, docker.OptionMST: "/usr/local/bin/mst"}, MSTVersion: testVersion, Out: &said})
	if err != nil || !strings.Contains(said.String(), "holds mst "+testVersion) {
		t.Errorf("Setup of a good image of one's own = %v, printing %q", err, said.String())
	}
	noContainersOf(t, run)
}

// TestOwnImageNotMST names a program that is not mst as mst.
func TestOwnImageNotMST(t *testing.T) {
	t.Parallel()
	mst, _ := workerImage(t)
	needBusybox(t)
	_, err := docker.New(t.Context(), runner.Params{
		Options: map[string]string{docker.OptionImage: busyboxImage, docker.OptionMST: "/bin/echo"}, MST: []string{mst}, MSTVersion: testVersion,
	})
	wantSays(t, "New with mst=/bin/echo", err, "/bin/echo in the image "+busyboxImage+" is not mst", `printed "version"`, "--runner-option mst=PATH")
}

func wantSays(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s = nil, want an error", what)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s = %v\nwant it to say %q", what, err, p)
		}
	}
}
