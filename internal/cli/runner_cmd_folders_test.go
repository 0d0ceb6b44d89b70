//go:build unix

package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/runner"
)

// TestRunnerCleanupFolders leaves, in a temporary folder of its own, the
// folders MST makes (bundles, shard, work and token folders): some of a
// process that has ended, one of this live process, one with no owner
// file. cleanup lists only the dead ones, and with RUN removes that run's.
func TestRunnerCleanupFolders(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	mark := func(name, run string, pid int) string {
		dir := filepath.Join(tmp, name)
		os.Mkdir(dir, 0o700)
		b, _ := json.Marshal(proctree.Owner{Run: run, PID: pid, Host: host})
		os.WriteFile(filepath.Join(dir, proctree.OwnerFile), b, 0o600)
		return dir
	}
	deadPID := dead.ProcessState.Pid()
	bundles := mark("mst-bundles-1", "r1", deadPID)
	shards := mark("mst-shards-1", "r1", deadPID)
	work := mark("mst-work-1", "r2", deadPID)
	tokens := mark("mst-tokens-"+strconv.Itoa(deadPID)+"-1", "", deadPID)
	live, err := runner.TempFolder("mst-bundles-", "r1")
	if err != nil {
		t.Fatal(err)
	}
	unmarked := filepath.Join(tmp, "mst-worker-1")
	os.Mkdir(unmarked, 0o700)

	type entry struct {
		Kind    string `json:"kind"`
		ID      string `json:"id"`
		Run     string `json:"run"`
		Removed bool   `json:"removed"`
	}
	cleanup := func(args ...string) map[string]entry {
		t.Helper()
		code, out, errOut := mstRun(t, append([]string{"runner", "cleanup", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("mst runner cleanup %v = %d: %s", args, code, errOut)
		}
		var doc struct {
			Kind      string  `json:"kind"`
			Leftovers []entry `json:"leftovers"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Kind != "mst.leftovers" {
			t.Fatalf("not an mst.leftovers object (%v):\n%s", err, out)
		}
		got := map[string]entry{}
		for _, e := range doc.Leftovers {
			if filepath.Dir(e.ID) == tmp {
				got[e.ID] = e
			}
		}
		return got
	}
	got := cleanup()
	for _, dir := range []string{bundles, shards, work, tokens} {
		if e, ok := got[dir]; !ok || e.Kind != "folder" || e.Removed {
			t.Errorf("cleanup lists %s as %+v (found %v), want a folder, not removed", dir, e, ok)
		}
	}
	for _, dir := range []string{live, unmarked} {
		if _, ok := got[dir]; ok {
			t.Errorf("cleanup lists %s, which is not a dead process's", dir)
		}
	}
	got = cleanup("r1")
	if len(got) != 2 || !got[bundles].Removed || !got[shards].Removed {
		t.Errorf("cleanup r1 = %+v, want %s and %s removed", got, bundles, shards)
	}
	for _, dir := range []string{bundles, shards} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s after cleanup r1: %v, want it gone", dir, err)
		}
	}
	for _, dir := range []string{work, tokens, live, unmarked} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s after cleanup r1: %v, want it kept", dir, err)
		}
	}
}
