package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mst-eval/mst/internal/cli"
)

// TestQuickstart runs the quickstart as the README says, through the CLI
// in-process against the real weather server binary, and checks that the
// report shows the two variants apart.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The eval names ../../bin/weather relative to itself: rebuild that
	// layout in a temporary folder.
	evalFile := quickstartIn(t, dir)
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"run", evalFile, "--results", filepath.Join(dir, "results"), "--json"},
		cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ()})
	if code != 0 {
		t.Fatalf("mst run exited %d\n%s", code, stderr.String())
	}
	var rep struct {
		Variants []struct {
			Variant  string   `json:"variant"`
			PassRate *float64 `json:"passRate"`
			Graded   int      `json:"graded"`
			Interval struct{ Low, High float64 }
		} `json:"variants"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, stdout.String())
	}
	rates := map[string]float64{}
	for _, v := range rep.Variants {
		if v.PassRate == nil || v.Graded != 42 {
			t.Fatalf("variant %s: pass rate %v over %d graded trials, want 42 graded", v.Variant, v.PassRate, v.Graded)
		}
		rates[v.Variant] = *v.PassRate
	}
	if rates["clear"]-rates["terse"] < 0.3 {
		t.Errorf("pass rates terse %.2f, clear %.2f: want clear ahead by 0.3 or more", rates["terse"], rates["clear"])
	}
}
