package runner_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/runner"
)

// TestSweepFolders leaves, in a temporary folder of its own, folders MST
// makes: of a process that has ended (bundles, fetched files, a grade
// runner's and a detached launch's bundles; shard and coordinator
// folders), of this live process, and with no owner file. The sweep every
// mst run makes first removes the dead bundles and work folders and
// nothing else: kept shard folders and coordinators' folders are for
// mst runner cleanup, live folders and unmarked ones are not MST's to take.
func TestSweepFolders(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	mark := func(name string) string {
		dir := filepath.Join(tmp, name)
		os.Mkdir(dir, 0o700)
		os.WriteFile(filepath.Join(dir, "bundle.json"), []byte("{}"), 0o600)
		b, _ := json.Marshal(proctree.Owner{Run: "r1", PID: dead.ProcessState.Pid(), Host: host})
		os.WriteFile(filepath.Join(dir, proctree.OwnerFile), b, 0o600)
		return dir
	}
	gone := []string{mark("mst-bundles-1"), mark("mst-fetch-1"), mark("mst-grade-1"), mark("mst-detach-1"), mark("mst-worker-1")}
	kept := []string{mark("mst-shards-1"), mark("mst-coordinator-1")}
	live, err := runner.TempFolder("mst-bundles-", "r2")
	if err != nil {
		t.Fatal(err)
	}
	unmarked := filepath.Join(tmp, "mst-work-1")
	os.Mkdir(unmarked, 0o700)
	kept = append(kept, live, unmarked)

	removed := runner.SweepFolders(t.Context())
	for _, d := range gone {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the sweep", d)
		}
		if !slices.Contains(removed, d) {
			t.Errorf("the sweep does not say it removed %s: %v", d, removed)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the sweep removed %s", d)
		}
	}
}
