package runner_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mst-eval/mst/runner"
)

// outsideCanary is the text of the files outside the worker's folder that
// a hostile worker points its links at.
const outsideCanary = `{"kind":"mst.transcript","case":"OUTSIDE-CANARY-7d3f"}`

// snapshot lists every entry under dir with its type, size, mode and
// modification time, and a file's content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := st.Mode().String() + " " + st.ModTime().String()
		if st.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFetchRefusesLinks: a hostile worker of a machine runner plants, in
// its results folder, links to a file and to a folder outside it (as the
// fetched file, on the way to it, and inside a fetched folder), a named
// pipe, and names paths that leave its results. Every such fetch fails,
// none returns a byte of what is outside or blocks, and nothing outside
// changes; a plain file beside them is fetched as ever.
func TestFetchRefusesLinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"secret.json", "dir/secret.json"} {
		if err := os.WriteFile(filepath.Join(outside, f), []byte(outsideCanary), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, outside)
	shards := filepath.Join(root, "shards")
	r := machineRunner(t, shards, "", func(m runner.Machine) runner.Machine { return m })

	type result struct {
		path string
		data []byte
		err  error
	}
	var results []result
	s := runner.Shard{Index: 0, Run: "fetch-test", Attempt: 1, BundleDir: t.TempDir(),
		Serve: func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
			go io.Copy(io.Discard, in)
			res := filepath.Join(shards, "shard-0", "results")
			plant := []struct{ name, link string }{
				{"file-link.json", filepath.Join(outside, "secret.json")},
				{"dir-link", filepath.Join(outside, "dir")},
				{"sub/inner-link.json", filepath.Join(outside, "secret.json")},
				{"folder/inner-dir-link", filepath.Join(outside, "dir")},
				{"relative-link.json", "../../../outside/secret.json"},
			}
			for _, p := range plant {
				at := filepath.Join(res, p.name)
				if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
					return err
				}
				if err := os.Symlink(p.link, at); err != nil {
					return err
				}
			}
			if err := syscall.Mkfifo(filepath.Join(res, "pipe.json"), 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(res, "ok.json"), []byte(`{"fine":true}`), 0o644); err != nil {
				return err
			}
			for _, p := range []string{
				"file-link.json", "dir-link", "dir-link/secret.json", "sub/inner-link.json",
				"folder", "relative-link.json", "pipe.json",
				"../../../outside/secret.json", "../results/../../../outside/secret.json", outside + "/secret.json", "sub/../../../../outside/secret.json",
				"ok.json",
			} {
				data, err := fetch(ctx, p)
				results = append(results, result{p, data, err})
			}
			return nil
		},
	}
	if _, err := r.RunShard(t.Context(), s); err != nil {
		t.Fatalf("RunShard = %v", err)
	}
	for _, res := range results {
		if strings.Contains(string(res.data), "OUTSIDE-CANARY") || (res.err != nil && strings.Contains(res.err.Error(), "OUTSIDE-CANARY")) {
			t.Errorf("fetch(%q) read a file outside the worker's folder: %q, %v", res.path, res.data, res.err)
		}
		if res.path == "ok.json" {
			if res.err != nil || string(res.data) != `{"fine":true}` {
				t.Errorf("fetch(ok.json) = %q, %v; want the file", res.data, res.err)
			}
		} else if res.err == nil {
			t.Errorf("fetch(%q) = %q, nil; want an error", res.path, res.data)
		}
	}
	after := snapshot(t, outside)
	if len(after) != len(before) {
		t.Errorf("the folder outside changed: %d entries before, %d after", len(before), len(after))
	}
	for p, v := range before {
		if after[p] != v {
			t.Errorf("%s outside the worker's folder changed: %q, now %q", p, v, after[p])
		}
	}
}
