package cli

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/transcript"
)

// shellWords is how sh splits line into words, each word once the shell
// has removed its quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `set -- `+line+`; for a; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatalf("sh -c 'set -- %s' = %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// awkward are strings a shell would change or split, unquoted.
var awkward = []string{
	"plain", "", "with space", "it's", `"double"`, "'", "''", `back\slash`, "$HOME", "$(echo no)", "`echo no`",
	"semi;colon", "a&b", "a|b", "glob*?[x]", "~home", "-leading-dash", "tab\there", "new\nline", "brace{a,b}",
	"hash #x", "!bang", "métier ünïcode", "a=b", "100%", "/abs/path/my 'runs'/x",
}

// TestShellQuote: whatever a string holds, the shell reads its quoted form
// back as that one string.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	var line []string
	for _, s := range awkward {
		line = append(line, shellQuote(s))
	}
	if diff := cmp.Diff(awkward, shellWords(t, strings.Join(line, " "))); diff != "" {
		t.Errorf("sh read the quoted words back as (-want +got):\n%s", diff)
	}
}

// TestResumeCommand: the hint is mst run --resume with the run's folder
// made absolute, the secrets file (absolute too) when one was given, and
// --max-errored when it was set, each one word to the shell whatever its
// characters; never the runner flags, which the resume keeps.
func TestResumeCommand(t *testing.T) {
	t.Parallel()
	for _, name := range awkward {
		if name == "" || strings.ContainsAny(name, "/\n") {
			continue
		}
		loc := filepath.Join("results "+name, "run-1")
		f := runFlags{secretsFile: filepath.Join("conf", name+".env"), runner: "processes", runnerOptions: []string{"shards=2"}, runnerSet: true}
		want := []string{"mst", "run", "--resume", absPath(loc), "--secrets-file", absPath(f.secretsFile)}
		if got := shellWords(t, resumeCommand(loc, "", f)); !slices.Equal(got, want) {
			t.Errorf("resumeCommand(%q) reads as %q, want %q", loc, got, want)
		}
		// A config the run's record does not lead to is named; extra flags
		// follow; a --max-errored given is kept.
		f = runFlags{maxErrored: "100%", maxErroredSet: true}
		want = []string{"mst", "run", absPath(name + ".yaml"), "--resume", absPath(loc), "--max-errored", "100%", "--retry-errored"}
		if got := shellWords(t, resumeCommand(loc, name+".yaml", f, "--retry-errored")); !slices.Equal(got, want) {
			t.Errorf("resumeCommand(%q, config) reads as %q, want %q", loc, got, want)
		}
	}
	// A credential store other than the default is given again.
	f := runFlags{store: storeFlags{name: "bucket", options: []string{"url=gs://b/it's here"}}}
	want := []string{"mst", "run", "--resume", absPath("r"), "--store", "bucket", "--store-option", "url=gs://b/it's here"}
	if got := shellWords(t, resumeCommand("r", "", f)); !slices.Equal(got, want) {
		t.Errorf("resumeCommand with --store bucket reads as %q, want %q", got, want)
	}
	f = runFlags{store: storeFlags{name: "local"}}
	if got := shellWords(t, resumeCommand("r", "", f)); slices.Contains(got, "--store") {
		t.Errorf("resumeCommand with the default store reads as %q, want no --store", got)
	}
	if c := resumeConfig(transcript.Run{ConfigPath: absPath("eval.yaml")}, "eval.yaml"); c != "" {
		t.Errorf("resumeConfig of the recorded config = %q, want none", c)
	}
	if c := resumeConfig(transcript.Run{ConfigPath: absPath("old/eval.yaml")}, "eval.yaml"); c != "eval.yaml" {
		t.Errorf("resumeConfig of a config elsewhere = %q, want eval.yaml", c)
	}
}

// TestResumeRunner: a resume runs on the runner, with the options, shards
// and keep, its run.json records, unless --runner names another runner or
// --runner-option replaces a key (and only that key).
func TestResumeRunner(t *testing.T) {
	t.Parallel()
	recorded := transcript.RunnerInfo{Name: "processes", Options: map[string]string{"dir": "/srv/shards"}, Shards: 3, Keep: "failed"}
	tests := []struct {
		name   string
		info   transcript.RunnerInfo
		flags  runFlags
		runner string
		want   run.RunnerChoice
	}{
		{"no flags keep everything", recorded, runFlags{runner: "local"},
			"processes", run.RunnerChoice{Options: map[string]string{"dir": "/srv/shards"}, Shards: 3, Keep: "failed"}},
		{"the same --runner keeps everything", recorded, runFlags{runner: "processes", runnerSet: true},
			"processes", run.RunnerChoice{Options: map[string]string{"dir": "/srv/shards"}, Shards: 3, Keep: "failed"}},
		{"a --runner-option replaces its key only", recorded, runFlags{runner: "local", runnerOptions: []string{"shards=2"}},
			"processes", run.RunnerChoice{Options: map[string]string{"dir": "/srv/shards"}, Shards: 2, Keep: "failed"}},
		{"a runner option of its own too", recorded, runFlags{runner: "local", runnerOptions: []string{"dir=/other", "keep=always"}},
			"processes", run.RunnerChoice{Options: map[string]string{"dir": "/other"}, Shards: 3, Keep: "always"}},
		{"another --runner starts afresh", recorded, runFlags{runner: "local", runnerSet: true},
			"local", run.RunnerChoice{Options: map[string]string{}, Shards: 1, Keep: "never"}},
		{"a record without a runner keeps nothing", transcript.RunnerInfo{}, runFlags{runner: "processes", runnerOptions: []string{"shards=2"}},
			"processes", run.RunnerChoice{Options: map[string]string{}, Shards: 2, Keep: "never"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, pairs, _ := resumeRunner(tt.info, tt.flags)
			if name != tt.runner {
				t.Errorf("resumeRunner: runner %s, want %s", name, tt.runner)
			}
			def, err := builtin.Runners().Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := run.ParseRunnerOptions(def, pairs, nil)
			if err != nil {
				t.Fatalf("ParseRunnerOptions(%q) = %v", pairs, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resumeRunner(%+v, %+v) runs with (-want +got):\n%s", tt.info, tt.flags, diff)
			}
		})
	}
}
