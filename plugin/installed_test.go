package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/plugin"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/transcript"
)

type always struct{}

func (always) Name() string                              { return "" }
func (always) Grade(*transcript.Transcript) grade.Result { return grade.Result{Passed: true} }

func graderDef(name string) *grade.Definition {
	return &grade.Definition{Name: name, New: func(json.RawMessage) (grade.Grader, error) { return always{}, nil }}
}

func TestInstallLeavesOutBadPlugins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A program whose namespace a compiled-in plugin has, and one that
	// is not executable: the first is a problem, the second not a plugin.
	if err := os.WriteFile(filepath.Join(dir, plugin.ProgramPrefix+"acme"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, plugin.ProgramPrefix+"notexec"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := plugin.Install([]plugin.Plugin{
		{Namespace: "acme", Version: "1.0.0", Graders: []*grade.Definition{graderDef("len")}},
		{Namespace: "acme", Version: "2.0.0"},
		{Namespace: "mst", Version: "1.0.0"},
		{Namespace: "Bad_NS", Version: "1.0.0"},
		{Namespace: "noversion"},
		{Namespace: "twice", Version: "1.0.0", Graders: []*grade.Definition{graderDef("x"), graderDef("x")}},
		{Namespace: "badname", Version: "1.0.0", Runners: []*runner.Definition{{Name: "Cloud VM"}}},
	}, dir, "1.0.0")
	got := in.Compiled()
	if len(got) != 1 || got[0].Namespace != "acme" || got[0].Version != "1.0.0" {
		t.Fatalf("Install kept %v, want only acme 1.0.0", got)
	}
	problems, _ := in.Problems()
	for ns, want := range map[string]string{
		"acme":      "taken by a plugin compiled into this mst",
		"mst":       "MST's own",
		"Bad_NS":    "lowercase letters",
		"noversion": "no Version",
		"twice":     "adds twice/grader/x twice",
		"badname":   `name "Cloud VM"`,
	} {
		if err := problems[ns]; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problem of %s = %v, want it to say %q", ns, err, want)
		}
	}
	if _, ok := in.Program("notexec"); ok {
		t.Error("a file that is not executable was taken for a program plugin")
	}
	if v := in.Versions(context.Background(), nil); len(v) != 1 || v["acme"] != "1.0.0" {
		t.Errorf("Versions = %v, want acme 1.0.0", v)
	}
}

func TestProgramThatIsNotAPlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A program that writes a log line on stdout instead of a response.
	script := "#!/bin/sh\necho 'starting up'\nsleep 60\n"
	if err := os.WriteFile(filepath.Join(dir, plugin.ProgramPrefix+"noisy"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	in := plugin.Install(nil, dir, "1.0.0")
	defer in.Close()
	if got := in.Load(t.Context()); len(got) != 0 {
		t.Fatalf("Load = %v, want no plugin", got)
	}
	problems, _ := in.Problems()
	if err := problems["noisy"]; err == nil || !strings.Contains(err.Error(), "not a JSON-RPC 2.0 response") {
		t.Errorf("problem = %v, want it to name the bad line", err)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	if ns, kind, name, ok := plugin.SplitName("acme/runner/cloud-vm"); !ok || ns != "acme" || kind != "runner" || name != "cloud-vm" {
		t.Errorf("SplitName = %q %q %q %v", ns, kind, name, ok)
	}
	if _, _, _, ok := plugin.SplitName("docker"); ok {
		t.Error("SplitName(docker) ok, want a built-in name")
	}
	if plugin.FullName("acme", plugin.KindGrader, "x") != "acme/grader/x" {
		t.Error("FullName")
	}
}
