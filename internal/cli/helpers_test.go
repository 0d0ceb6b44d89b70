package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/mst-eval/mst/internal/cli"
)

// waitFiles waits until the glob (args[1]) matches at least N (args[0])
// files, for up to 60 seconds: `waitfiles 2 results/*/transcripts/*/*.json`.
func waitFiles(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waitfiles N GLOB")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("waitfiles: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		matches, _ := filepath.Glob(ts.MkAbs(args[1]))
		if len(matches) >= n {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfiles: %d files match %s after 60s, want %d", len(matches), args[1], n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// quickstartCopy lays out the quickstart eval and its weather server in a
// temporary folder and returns the eval's path.
func quickstartCopy(t *testing.T) string {
	t.Helper()
	return quickstartIn(t, t.TempDir())
}

// quickstartIn is quickstartCopy into dir.
func quickstartIn(t *testing.T, dir string) string {
	t.Helper()
	qs := filepath.Join(dir, "examples", "quickstart")
	os.MkdirAll(qs, 0o755)
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(qs, f), b, 0o644)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "weather"), "github.com/mst-eval/mst/examples/quickstart/weather")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the weather server: %v\n%s", err, out)
	}
	return filepath.Join(qs, "eval.yaml")
}

// runEvalFiles writes files (eval.yaml, its datasets, secrets.env) into
// dir and runs mst run on eval.yaml there, in process, with the secrets
// file and results in dir/results; it fails the test unless mst exits 0.
func runEvalFiles(t *testing.T, dir string, files map[string]string) (stdout, stderr string) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	code := cli.Main(t.Context(), []string{"run", filepath.Join(dir, "eval.yaml"), "--results", filepath.Join(dir, "results"),
		"--secrets-file", filepath.Join(dir, "secrets.env")},
		cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if code != 0 {
		t.Fatalf("mst run exited %d\n%s", code, errOut.String())
	}
	return out.String(), errOut.String()
}
