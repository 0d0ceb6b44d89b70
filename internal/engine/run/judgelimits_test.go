package run_test

import (
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// TestJudgesObeyProviderLimits judges eight trials with a model whose
// provider limits.providers caps at one request in flight: the judges,
// graded four at a time beside the collection, never send two at once,
// and every trial is judged. (The latency makes requests that the cap
// did not hold overlap; the cap itself needs no timing to hold.)
func TestJudgesObeyProviderLimits(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{
		Latency:       20 * time.Millisecond,
		Conversations: []providertest.Conversation{providertest.JudgeConversation("", providertest.JudgeReply{Verdict: "pass", Score: 5}.Turn())},
	})
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: limited
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
trials: 2
graders:
  - judge: {rubric: supported, model: anthropic/claude-judge, baseURL: "` + fake.URL + `", apiKeyEnv: JUDGE_KEY}
limits: {concurrency: 4, providers: {anthropic: 1}}
`,
		"cases.jsonl": `{"id": "a", "input": "Please echo 'a'"}
{"id": "b", "input": "Please echo 'b'"}
{"id": "c", "input": "Please echo 'c'"}
{"id": "d", "input": "Please echo 'd'"}
`,
	})
	set := secrets.New()
	set.Add("JUDGE_KEY", "judge-limits-key")
	req := request(path)
	req.Secrets = set
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	o := options(store.Dir{Root: t.TempDir(), Eval: "weather"})
	o.Secrets, o.Redact = set, secrets.NewRedactor(set)
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Requests()); n != 8 {
		t.Errorf("%d judge requests, want 8", n)
	}
	if m := fake.MaxInFlight(); m != 1 {
		t.Errorf("%d judge requests in flight at once, want 1 (limits.providers.anthropic)", m)
	}
	if j := out.Report.Variants[0].Judges; len(j) != 1 || j[0].Scored != 8 {
		t.Errorf("judges = %+v, want 8 trials scored", j)
	}
}
