package plugins_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/testkit/testneed"
)

// TestCustomBuild builds an mst with the three Go example plugins compiled
// in (mst build, as a user would), finds the Python program plugin on
// MST_PLUGIN_PATH, and runs one eval that uses a plugin of every kind:
// cases from the SQLite dataset source, the echo-agent client, the
// answer-length and contains-all graders, on the processes runner and on
// the subdir runner plugin.
func TestCustomBuild(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	python := needPython(t)
	bin := t.TempDir()
	runGo(t, root, "build", "-trimpath", "-o", bin, "./cmd/mst", "./examples/quickstart/weather")
	stock := filepath.Join(bin, "mst")
	custom := filepath.Join(bin, "mst-acme")
	var with []string
	for _, m := range goModules {
		abs, _ := filepath.Abs(m)
		with = append(with, "--with", "example.com/mst-plugins/"+m+"="+abs)
	}
	out := mst(t, stock, nil, append([]string{"build", "--mst-dir", root, "-o", custom}, with...)...)
	if strings.TrimSpace(out) != custom {
		t.Fatalf("mst build printed %q, want the path %s", out, custom)
	}

	sqlPath, _ := filepath.Abs("dataset-python")
	pyPath, _ := filepath.Abs("client-python")
	env := []string{"MST_PLUGIN_PATH=" + sqlPath + string(filepath.ListSeparator) + pyPath}

	// mst plugins lists all four, with every kind.
	var list struct {
		Kind    string `json:"kind"`
		Plugins []struct {
			Namespace, Version, Origin, Problem string
			Kinds                               map[string][]string
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(mst(t, custom, env, "plugins", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, p := range list.Plugins {
		if p.Problem != "" {
			t.Errorf("plugin %s: %s", p.Namespace, p.Problem)
		}
		for _, names := range p.Kinds {
			for _, n := range names {
				kinds[n] = true
			}
		}
	}
	for _, want := range []string{"acme-infra/runner/subdir", "acme-bots/client/echo-agent", "acme/grader/answer-length", "acmesql/dataset/sqlite", "acmesql/grader/contains-all", "acmepy/client/first-tool"} {
		if !kinds[want] {
			t.Errorf("mst plugins lists no %s; it lists %v", want, kinds)
		}
	}

	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), python, "dataset-python/make_db.py", filepath.Join(dir, "cases.db"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_db.py: %v\n%s", err, out)
	}
	config := `name: plugins
datasets:
  - source: acmesql/dataset/sqlite
    options: {file: cases.db}
servers:
  weather: {command: ` + filepath.Join(bin, "weather") + `}
variants:
  echo: {client: acme-bots/client/echo-agent, model: offline}
  py: {client: acmepy/client/first-tool, model: offline}
trials: 2
graders:
  - acme/grader/answer-length: {min: 1, max: 100000}
  - acmesql/grader/contains-all: {words: ["°C"]}
plugins:
  acme: {version: 1.0.0, from: example.com/mst-plugins/grader}
  acme-bots: {version: 1.0.0, from: example.com/mst-plugins/client}
  acme-infra: {version: 1.0.0, from: example.com/mst-plugins/runner}
  acmesql: {version: 1.0.0, from: https://example.com/acmesql}
  acmepy: {version: 1.0.0, from: https://example.com/acmepy}
`
	evalFile := filepath.Join(dir, "eval.yaml")
	if err := os.WriteFile(evalFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	mst(t, custom, env, "validate", evalFile)

	// The stock mst has none of the Go plugins: validate says which and
	// how to get them.
	msg, code := mstFails(t, stock, env, "validate", evalFile)
	for _, want := range []string{"plugins.acme: this mst has no plugin acme", "mst build --with example.com/mst-plugins/grader@v1.0.0"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stock mst validate (exit %d) says:\n%s\nwant it to say %q", code, msg, want)
		}
	}

	for _, runner := range [][]string{
		{"--runner", "processes", "--runner-option", "shards=2"},
		{"--runner", "acme-infra/runner/subdir", "--runner-option", "root=" + t.TempDir()},
	} {
		t.Run(runner[1], func(t *testing.T) {
			args := append([]string{"run", evalFile, "--json", "--results", t.TempDir()}, runner...)
			var rep struct {
				Variants []struct {
					Variant string `json:"variant"`
					Trials  int    `json:"trials"`
					Graded  int    `json:"graded"`
					Passed  int    `json:"passed"`
				} `json:"variants"`
			}
			out := mst(t, custom, env, args...)
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("mst run --json: %v\n%s", err, out)
			}
			// Three cases from the SQLite file, two trials each, under a
			// Go client and a Python one, all graded by both plugin
			// graders. The clients and the weather server are
			// deterministic: the same 2 of 6 pass on every runner.
			if len(rep.Variants) != 2 {
				t.Fatalf("mst run --json: %d variants, want 2\n%s", len(rep.Variants), out)
			}
			for _, v := range rep.Variants {
				if v.Trials != 6 || v.Graded != 6 {
					t.Errorf("variant %s: %d trials, %d graded; want 6 and 6\n%s", v.Variant, v.Trials, v.Graded, out)
				}
				if v.Passed != 2 {
					t.Errorf("variant %s: %d passed, want 2", v.Variant, v.Passed)
				}
			}
		})
	}
}

// mst runs an mst binary and returns its stdout, failing the test with
// its stderr when it exits non-zero.
func mst(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// mstFails runs an mst binary that must fail, and returns its stderr and
// exit code.
func mstFails(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("%s %s: want a failure, got %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out), ee.ExitCode()
}

// needPython returns python3, failing under CI when it is missing.
func needPython(t *testing.T) string {
	t.Helper()
	return testneed.Program(t, "python3", "the program plugins need it (apt-get install python3)")
}
