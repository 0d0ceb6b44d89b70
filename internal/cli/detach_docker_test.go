//go:build linux

package cli_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/cli"
)

// TestDetachDocker cancels a detached run on the docker runner mid-run,
// and kills another one's coordinator container and finishes its run with
// a resume: the processes runner's tests (testDetachCancel,
// testDetachLost) on coordinator and worker containers, with the bucket in
// the GCS emulator of this process (the containers share the host's
// network to reach it). It sets the test process's environment, so it
// cannot run beside the other docker tests, and builds their tools again
// from the caches.
func TestDetachDocker(t *testing.T) {
	start := time.Now()
	w := dockerWorld(dockerTools(t))
	t.Logf("the docker tools took %s", time.Since(start).Round(time.Millisecond))
	t.Run("Cancel", func(t *testing.T) { timed(t, func() { testDetachCancel(t, w) }) })
	t.Run("Lost", func(t *testing.T) { timed(t, func() { testDetachLost(t, w) }) })
}

// timed runs f and logs how long it took, for the cost of a test in CI.
func timed(t *testing.T, f func()) {
	start := time.Now()
	defer func() { t.Logf("took %s", time.Since(start).Round(time.Millisecond)) }()
	f()
}

// dockerWorld is the docker runner with the static mst and test server
// of tools: the coordinator machine is a container labelled with the
// detached run's id, and the workers are containers beside it.
func dockerWorld(tools string) *detachWorld {
	return &detachWorld{
		runner: []string{"--runner", "docker", "--runner-option", "network=host"},
		bin:    filepath.Join(tools, "mst"),
		// The lock a killed coordinator's mst run held lasts as long as
		// that mst says: nothing of this environment reaches the
		// container but the secrets file's values, which its commands get.
		secrets: []string{cli.LeaseEnv + "=2000ms"},
		server: func(t *testing.T, dir string) string {
			data, err := os.ReadFile(filepath.Join(tools, "mcp-testserver"))
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "mcp-testserver")
			if err := os.WriteFile(p, data, 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		},
		// The marks folder is mounted read-only into the workers.
		noMarks: true,
		files: func(t *testing.T, s map[string]any) map[string][]byte {
			name := coordinatorContainer(t, s["id"].(string))
			if name == "" {
				t.Fatalf("no coordinator container of %v", s["id"])
			}
			out, err := exec.Command("docker", "cp", name+":/work", "-").Output()
			if err != nil {
				t.Fatalf("docker cp %s:/work: %v", name, err)
			}
			files := map[string][]byte{}
			tr := tar.NewReader(bytes.NewReader(out))
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("the tar of %s:/work: %v", name, err)
				}
				if h.Typeflag == tar.TypeReg {
					files[h.Name], _ = io.ReadAll(tr)
				}
			}
			return files
		},
		kill: func(t *testing.T, s map[string]any) {
			name := coordinatorContainer(t, s["id"].(string))
			if out, err := exec.Command("docker", "kill", name).CombinedOutput(); err != nil {
				t.Fatalf("docker kill %s: %v\n%s", name, err, out)
			}
		},
		cleanup: func(d *detached) {
			// The workers a killed coordinator left run until their own
			// deadline; the test's go now, with its coordinators.
			var filters []string
			for _, id := range d.launches {
				filters = append(filters, "label=mst.coordinator="+id)
				if s := d.statusOrNil(id); s != nil && s["run"] != nil {
					filters = append(filters, "label=mst.run="+s["run"].(string))
				}
			}
			for _, f := range filters {
				out, _ := exec.Command("docker", "ps", "--all", "--quiet", "--filter", f).Output()
				if ids := strings.Fields(string(out)); len(ids) > 0 {
					exec.Command("docker", append([]string{"rm", "--force"}, ids...)...).Run()
				}
			}
		},
	}
}

// coordinatorContainer names the coordinator container of the detached
// run id, or "" when there is none.
func coordinatorContainer(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "--all", "--format", "{{.Names}}", "--filter", "label=mst.coordinator="+id).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.TrimSpace(string(out))
}
