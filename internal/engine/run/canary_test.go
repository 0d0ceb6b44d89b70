//go:build linux

package run_test

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/canarytest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// TestCanaries plants secrets where a run meets them: a secrets-file value
// the model writes into a tool call and its answer and the server echoes
// back, the provider key quoted in an error body, a token a server gets
// through ${secret:NAME}, a value that is not valid UTF-8, and one nobody
// uses. The run goes through a processes worker, with the key also in
// MST's own environment. While a trial is in flight (the server's sleep
// tool has left its mark), no process under this one has a canary in its
// argv, the worker has none in its environment, and the server has its
// token and nothing else; once the run is over, no byte of the run folder,
// the shard folders or the log and progress output holds any canary in any
// form the redaction knows.
func TestCanaries(t *testing.T) {
	const (
		fileValue = "canary-file-3b7e91"
		apiKey    = "canary-apikey-5d02c8"
		token     = "canary-server-token-a41f"
		unused    = "canary-unused-77e2c0"
		raw       = "canary-raw-\xe9\xff\xfe-41"
	)
	t.Setenv("ANTHROPIC_API_KEY", apiKey)
	set := secrets.New()
	for name, v := range map[string]string{"FILE_VALUE": fileValue, "ANTHROPIC_API_KEY": apiKey, "SRV_TOKEN": token, "UNUSED": unused, "RAW": raw} {
		if err := set.Add(name, v); err != nil {
			t.Fatal(err)
		}
	}
	// found reports which canaries b holds, in any form the redaction knows.
	// A marker [redacted:NAME] that was already there does not count.
	found := func(b []byte) []string {
		count := func(b []byte) map[string]int {
			n := map[string]int{}
			for _, m := range redactedName.FindAllSubmatch(b, -1) {
				n[string(m[1])]++
			}
			return n
		}
		before, after := count(b), count(secrets.NewRedactor(set).Bytes(b))
		var names []string
		for name, n := range after {
			if n > before[name] {
				names = append(names, name)
			}
		}
		return names
	}

	fake := providertest.New(t, providertest.Script{
		Faults: []providertest.Fault{{Status: 400, Times: 1, Message: "invalid x-api-key " + apiKey}},
		Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"text": "model says " + fileValue}}}},
			{ToolCalls: []providertest.Call{{Tool: "sleep", Arguments: map[string]any{"seconds": 600}}}},
			{Text: "done, the value was " + fileValue},
		}}},
	})
	marks := t.TempDir()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: canaries
datasets: [cases.jsonl]
servers:
  test:
    command: SERVER
    args: [--mark, "` + marks + `"]
    env: {SRV_TOKEN: "${secret:SRV_TOKEN}"}
variants:
  v:
    model: anthropic/claude-test
    clientOptions: {baseURL: "` + fake.URL + `"}
trials: 2
limits: {concurrency: 1}
`,
		"cases.jsonl": `{"id": "a", "input": "Please echo and then sleep"}` + "\n",
	})
	p, o, shards, printed := canaryRun(t, path, set)
	o.Runner = runner.ProcessesDefinition()
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": shards}, Shards: 1, Keep: runner.KeepNever}

	inFlight := make(chan struct{})
	go func() {
		defer close(inFlight)
		for {
			if ents, _ := os.ReadDir(marks); len(ents) > 0 {
				return
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		<-inFlight
		var server, worker bool
		for _, pr := range canarytest.Descendants(os.Getpid()) {
			if names := found(pr.Cmdline); len(names) > 0 {
				t.Errorf("process %d (%q) has %v in its argv", pr.PID, pr.Cmdline, names)
			}
			switch {
			case bytes.Contains(pr.Cmdline, []byte("--mark")):
				server = true
				if !bytes.Contains(pr.Environ, []byte("SRV_TOKEN="+token)) {
					t.Errorf("the server's environment lacks the value its env refers to")
				}
				for _, c := range []string{fileValue, apiKey, unused, raw} {
					if bytes.Contains(pr.Environ, []byte(c)) {
						t.Errorf("the server's environment has a secret it was not given: %v", found([]byte(c)))
					}
				}
			default:
				worker = worker || bytes.Contains(pr.Cmdline, []byte("--bundle"))
				if names := found(pr.Environ); len(names) > 0 {
					t.Errorf("process %d (%q) has %v in its environment", pr.PID, pr.Cmdline, names)
				}
			}
		}
		if !server || !worker {
			t.Errorf("the server (%t) or the worker (%t) was not found under this process", server, worker)
		}
		os.WriteFile(filepath.Join(marks, testserver.WakeFile), nil, 0o600)
	}()
	out, err := run.Execute(t.Context(), p, o)
	<-checked
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	if n := len(fake.Requests()); n < 4 {
		t.Errorf("the fake provider got %d requests, want the fault and three turns", n)
	}
	var files int
	for _, dir := range []string{out.Store.Location(), shards} {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files++
			b, _ := os.ReadFile(path)
			if names := found(b); len(names) > 0 {
				t.Errorf("%s holds %v", path, names)
			}
			return nil
		})
	}
	if files == 0 {
		t.Fatalf("the run stored no file")
	}
	if names := found(printed.Bytes()); len(names) > 0 {
		t.Errorf("the log holds %v", names)
	}
}

var redactedName = regexp.MustCompile(`\[redacted:([A-Za-z0-9_]+)\]`)

// lockedBuffer is a bytes.Buffer the run's goroutines may write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// canaryRun plans the eval at path with the secrets set and returns the
// plan and run options of a canary test: a directory store in a folder of
// its own, a shard folder, the secrets and their redactor, and a debug log kept in
// printed, for the test to search.
func canaryRun(t *testing.T, path string, set *secrets.Set) (*run.Plan, run.Options, string, *bytes.Buffer) {
	t.Helper()
	req := request(path)
	req.Secrets = set
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan = %v", err)
	}
	root, shards := t.TempDir(), t.TempDir()
	printed := &bytes.Buffer{}
	o := options(store.Dir{Root: root, Eval: "weather"})
	o.Secrets, o.Redact = set, secrets.NewRedactor(set)
	o.Logger = slog.New(slog.NewTextHandler(&lockedBuffer{b: printed}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return p, o, shards, printed
}
