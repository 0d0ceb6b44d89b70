package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mst-eval/mst/internal/ground/proctree"
)

// ownerFile is the file in each of MST's folders that names its run and
// owner (see MarkFolder).
const ownerFile = proctree.OwnerFile

// folderKinds are the prefixes of the folders MST makes in the temporary
// folder, with what each holds.
// sweep says SweepFolders removes such a folder once its process has
// ended: it holds nothing a person may want to look at.
var folderKinds = []struct {
	prefix, what string
	sweep        bool
}{
	{"mst-bundles-", "the coordinator's bundles", true},
	{"mst-shards-", "the processes runner's shard folders", false},
	{"mst-work-", "a local worker's work folder", true},
	{"mst-worker-", "a worker's work folder", true},
	{"mst-fetch-", "files fetched from a worker", true},
	{"mst-tokens-", "a worker's token files", true},
	{"mst-grade-", "a grade runner's bundles", true},
	{"mst-detach-", "a detached run's bundle, as it was sent", true},
	{"mst-coordinator-", "a detached run's coordinator folder (processes runner)", false},
	{"mst-secrets-", "a detached run's coordinator's private secrets", true},
}

// MarkFolder writes, into a folder MST made for a while, a file naming
// the run (or "") and this process, so that `mst runner cleanup` can
// remove the folder once this process has died without removing it, and
// leaves it while this process runs.
func MarkFolder(dir, runID string) error {
	return proctree.MarkOwner(dir, runID)
}

// TempFolder makes a folder in the temporary folder, as os.MkdirTemp("",
// pattern) does, and marks it (MarkFolder). Use a pattern that starts with
// one of the names `mst runner cleanup` looks for: mst-bundles-,
// mst-shards-, mst-work-, mst-worker-, mst-fetch-.
func TempFolder(pattern, runID string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if err := MarkFolder(dir, runID); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// folderRoots are where MST's folders are looked for: the temporary
// folder, and the memory-backed folders worker token files go to.
func folderRoots() []string {
	roots := []string{os.TempDir(), "/dev/shm"}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		roots = append(roots, d)
	}
	return roots
}

// runTokens is the token folder of a worker on a machine whose /run is
// memory-backed (shard.makeTokensDir).
const runTokens = "/run/mst/tokens"

// FolderLeftovers lists the folders on this machine that MST processes
// made and left behind when they died: bundles, the processes runner's
// shard folders, work folders, fetched files and token folders. Only a
// folder whose owner file names a process of this host that has ended is
// listed, so the folders of a run still going are never listed. runID
// keeps only that run's folders ("" keeps every run's, and those naming
// no run).
func FolderLeftovers(ctx context.Context, runID string) ([]Leftover, error) {
	var out []Leftover
	seen := map[string]bool{}
	consider := func(dir, what string) {
		if seen[dir] {
			return
		}
		seen[dir] = true
		if l, ok := folderLeftover(dir, what, runID); ok {
			out = append(out, l)
		}
	}
	for _, root := range folderRoots() {
		entries, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			for _, k := range folderKinds {
				if strings.HasPrefix(e.Name(), k.prefix) {
					consider(filepath.Join(root, e.Name()), k.what)
				}
			}
		}
	}
	consider(runTokens, "a worker's token files")
	return out, ctx.Err()
}

// SweepFolders removes the folders of this machine that MST processes
// made for a while and left when they were killed (bundles, fetched
// files, work and token folders), as mst runner cleanup --all would; it
// leaves the processes runner's shard folders, which keep may have kept
// for a person to look at. Every mst run calls it first. It returns the
// folders it removed.
func SweepFolders(ctx context.Context) []string {
	var removed []string
	for _, root := range folderRoots() {
		entries, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "mst-") {
				continue
			}
			for _, k := range folderKinds {
				if !k.sweep || !strings.HasPrefix(e.Name(), k.prefix) {
					continue
				}
				dir := filepath.Join(root, e.Name())
				if l, ok := folderLeftover(dir, k.what, ""); ok && RemoveFolder(ctx, l) == nil {
					removed = append(removed, dir)
				}
			}
		}
	}
	return removed
}

// CoordinatorRunFile is a file that a detached run's coordinator writes,
// in its folders (the machine's WorkDir, its private secrets folder), once
// it learns the id of the run it makes: their owner file names the
// detached run, and this file the run, so that mst runner cleanup finds
// them by either id.
const CoordinatorRunFile = ".mst-coordinator-run"

// folderLeftover is dir as a leftover, when its owner file names a process
// that has ended (of run runID, unless that is "": the run its owner file
// names, or the one its CoordinatorRunFile names).
func folderLeftover(dir, what, runID string) (Leftover, bool) {
	o, err := proctree.ReadOwner(dir)
	if err != nil || o.Alive() {
		return Leftover{}, false
	}
	if runID != "" && o.Run != runID {
		made, err := os.ReadFile(filepath.Join(dir, CoordinatorRunFile))
		if err != nil || strings.TrimSpace(string(made)) != runID {
			return Leftover{}, false
		}
	}
	return Leftover{ID: dir, Run: o.Run, Shard: -1, Detail: fmt.Sprintf("%s, of process %d, which has ended", what, o.PID)}, true
}

// RemoveFolder removes a folder FolderLeftovers listed, after checking
// again that its owner has ended.
func RemoveFolder(ctx context.Context, l Leftover) error {
	o, err := proctree.ReadOwner(l.ID)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(l.ID); errors.Is(serr, os.ErrNotExist) {
			return nil // gone already
		}
	}
	if err != nil {
		return fmt.Errorf("%s: not removed: %w", l.ID, err)
	}
	if o.Alive() {
		return fmt.Errorf("%s: not removed: its process %d runs again", l.ID, o.PID)
	}
	if err := os.RemoveAll(l.ID); err != nil {
		return err
	}
	if l.ID == runTokens {
		os.Remove(filepath.Dir(runTokens)) // only when empty
	}
	return nil
}
