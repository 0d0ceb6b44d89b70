//go:build linux

package run_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/canarytest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
)

// TestJudgeKeyCanary runs a judged eval through a processes worker with a
// judge key in the secrets file: the coordinator's judge uses the key
// (the fake provider sees it), while no byte the coordinator sends the
// collect worker holds it (the client's key does go there, which shows
// the tap works), no process under this one has it in its argv or its
// environment while a trial is in flight, and no file of the run or the
// shard folders, nor the log, holds it in any form the redaction knows.
func TestJudgeKeyCanary(t *testing.T) {
	const (
		judgeKey  = "canary-judge-key-9f1e27"
		clientKey = "canary-client-key-4b6d10"
	)
	set := secrets.New()
	for name, v := range map[string]string{"JUDGE_KEY": judgeKey, "ANTHROPIC_API_KEY": clientKey} {
		if err := set.Add(name, v); err != nil {
			t.Fatal(err)
		}
	}
	holds := func(b []byte) bool { return canarytest.Holds(b, "JUDGE_KEY", judgeKey) }
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
		providertest.JudgeConversation("<rubric>", providertest.JudgeReply{Verdict: "pass", Score: 4, Rationale: "fine"}.Turn()),
		{Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "sleep", Arguments: map[string]any{"seconds": 600}}}},
			{Text: "done"},
		}},
	}})
	marks := t.TempDir()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: judgecanary
datasets: [cases.jsonl]
servers:
  test:
    command: SERVER
    args: [--mark, "` + marks + `"]
variants:
  v:
    model: anthropic/claude-test
    clientOptions: {baseURL: "` + fake.URL + `"}
graders:
  - judge: {rubric: supported, model: anthropic/claude-judge, baseURL: "` + fake.URL + `", apiKeyEnv: JUDGE_KEY}
limits: {concurrency: 1}
`,
		"cases.jsonl": `{"id": "a", "input": "Please sleep"}` + "\n",
	})
	p, o, shards, printed := canaryRun(t, path, set)
	tap := &lockedBuffer{b: &bytes.Buffer{}}
	o.Runner = tapped(runner.ProcessesDefinition(), tap)
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": shards}, Shards: 1, Keep: runner.KeepNever}

	checked := make(chan struct{})
	go func() {
		defer close(checked)
		for {
			if ents, _ := os.ReadDir(marks); len(ents) > 0 {
				break
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		worker := false
		for _, pr := range canarytest.Descendants(os.Getpid()) {
			worker = worker || bytes.Contains(pr.Cmdline, []byte("--bundle"))
			if holds(pr.Cmdline) || holds(pr.Environ) {
				t.Errorf("process %d (%q) holds the judge key in its argv or environment", pr.PID, pr.Cmdline)
			}
		}
		if !worker {
			t.Errorf("no collect worker was found under this process")
		}
		os.WriteFile(filepath.Join(marks, testserver.WakeFile), nil, 0o600)
	}()
	out, err := run.Execute(t.Context(), p, o)
	<-checked
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	// The judge ran, here, with its key.
	judged := false
	for _, r := range fake.Requests() {
		if strings.Contains(r.FirstUserText, "<rubric>") {
			judged = true
			if !strings.Contains(r.Header.Get("x-api-key")+r.Header.Get("Authorization"), judgeKey) {
				t.Errorf("the judge's request carries key %q (%v)", r.Header.Get("x-api-key"), r.Header)
			}
		} else if strings.Contains(r.Header.Get("x-api-key")+r.Header.Get("Authorization"), judgeKey) {
			t.Errorf("a client request carries the judge's key")
		}
	}
	if !judged {
		t.Fatalf("no judge request reached the fake provider")
	}
	v := out.Report.Variants[0]
	if len(v.Judges) != 1 || v.Judges[0].Scored != 1 || v.Passed != 1 {
		t.Errorf("the report's judges = %+v, passed %d; want one judged trial that passed", v.Judges, v.Passed)
	}
	sent := tap.b.Bytes()
	if holds(sent) {
		t.Errorf("the coordinator sent the collect worker the judge key")
	}
	if !bytes.Contains(sent, []byte(clientKey)) {
		t.Errorf("the tap saw no client key: it does not see what the worker is sent")
	}
	for _, dir := range []string{out.Store.Location(), shards} {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, _ := os.ReadFile(path); holds(b) {
				t.Errorf("%s holds the judge key", path)
			}
			return nil
		})
	}
	if holds(printed.Bytes()) {
		t.Errorf("the log holds the judge key")
	}
}

// tapped is def whose shards copy what the coordinator writes to their
// worker into tap.
func tapped(def *runner.Definition, tap io.Writer) *runner.Definition {
	return wrapRunner(def, func(r runner.Runner) runner.Runner { return tapRunner{r, tap} })
}

type tapRunner struct {
	runner.Runner
	tap io.Writer
}

func (r tapRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	serve := s.Serve
	s.Serve = func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
		return serve(ctx, in, io.MultiWriter(out, r.tap), fetch)
	}
	return r.Runner.RunShard(ctx, s)
}
