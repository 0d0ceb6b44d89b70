package run_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// stopEval is an eval of six echo cases, one trial each, under a healthy
// offline variant and a variant "claude" whose provider is the fake server
// at PROVIDER. CONCURRENCY is the limit of trials at once per shard.
const stopEval = `
name: stop
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  offline: {model: offline}
  claude:
    model: anthropic/claude-test
    clientOptions: {baseURL: "PROVIDER"}
trials: 1
limits: {concurrency: CONCURRENCY}
`

// stopCases are stopEval's cases.
var stopCases = func() string {
	var b strings.Builder
	for i := range 6 {
		fmt.Fprintf(&b, `{"id": "c%d", "input": "Please echo 'c%d'"}`+"\n", i, i)
	}
	return b.String()
}()

// runStopEval runs stopEval against a fake provider following script, with
// shards shards of concurrency trials at once (shards > 1 runs on the
// processes runner), and returns the run and its stored transcripts by
// variant. cases, when not "", replaces stopCases.
func runStopEval(t *testing.T, script providertest.Script, cases string, shards, concurrency int) (*run.Outcome, map[string][]*transcript.Transcript) {
	t.Helper()
	fake := providertest.New(t, script)
	eval := strings.NewReplacer("PROVIDER", fake.URL, "CONCURRENCY", fmt.Sprint(concurrency)).Replace(stopEval)
	if cases == "" {
		cases = stopCases
	}
	path := writeEval(t, map[string]string{"eval.yaml": eval, "cases.jsonl": cases})
	keys := secrets.New()
	if err := keys.Add("ANTHROPIC_API_KEY", "test-key-not-secret"); err != nil {
		t.Fatal(err)
	}
	req := request(path)
	req.Secrets = keys
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	o := options(store.Dir{Root: t.TempDir(), Eval: "weather"})
	o.Secrets = keys
	o.Redact = secrets.NewRedactor(keys)
	if shards > 1 {
		o.Runner = runner.ProcessesDefinition()
		o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: shards, Keep: runner.KeepNever}
	}
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute(%s) = %v", path, err)
	}
	got := map[string][]*transcript.Transcript{}
	for _, k := range p.Keys() {
		tr, err := out.Store.ReadTranscript(t.Context(), k)
		if err != nil {
			t.Fatalf("ReadTranscript(%s) = %v, want every trial to have a transcript", k, err)
		}
		got[k.Variant] = append(got[k.Variant], tr)
	}
	return out, got
}

// statuses counts transcripts by status, an errored one as
// "errored (cause)".
func statuses(ts []*transcript.Transcript) map[string]int {
	out := map[string]int{}
	for _, tr := range ts {
		s := tr.Outcome.Status
		if s == transcript.Errored {
			s += " (" + tr.Outcome.Cause + ")"
		}
		out[s]++
	}
	return out
}

// down is a provider that refuses every request with a 401.
var down = providertest.Script{Faults: []providertest.Fault{{Status: 401, Times: 1 << 20, Message: "invalid x-api-key"}}}

// TestStopVariantWhoseProviderIsDown: a variant whose provider answers 401
// to everything runs exactly StopAfter trials (one shard, one trial at a
// time), all errored; the rest are skipped with the reason, and the healthy
// variant next to it answers every trial.
func TestStopVariantWhoseProviderIsDown(t *testing.T) {
	t.Parallel()
	out, got := runStopEval(t, down, "", 1, 1)
	want := map[string]int{"errored (provider)": run.StopAfter, transcript.Skipped: 6 - run.StopAfter}
	if diff := cmp.Diff(want, statuses(got["claude"])); diff != "" {
		t.Errorf("claude, its provider answering 401: outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{transcript.Answered: 6}, statuses(got["offline"])); diff != "" {
		t.Errorf("offline, next to a stopped variant: outcomes (-want +got):\n%s", diff)
	}
	for _, tr := range got["claude"] {
		if tr.Outcome.Status != transcript.Skipped {
			continue
		}
		d := tr.Outcome.Detail
		t.Logf("%s: %s", tr.Key, d)
		for _, part := range []string{"variant claude stopped", fmt.Sprintf("first %d trials all errored (provider: ", run.StopAfter), "invalid x-api-key", "a resume of run " + out.Run.ID + " runs the skipped trials"} {
			if !strings.Contains(d, part) {
				t.Errorf("%s: skipped with detail %q, want it to say %q", tr.Key, d, part)
			}
		}
		if tr.Usage != (transcript.Usage{}) {
			t.Errorf("%s: skipped with usage %+v, want none", tr.Key, tr.Usage)
		}
	}
	if c := out.Run.Counts; c.Skipped != 6-run.StopAfter || c.Errored != run.StopAfter || c.Answered != 6 || c.Missing != 0 {
		t.Errorf("run counts %+v, want %d skipped, %d errored, 6 answered, none missing", c, 6-run.StopAfter, run.StopAfter)
	}
}

// TestStopAcrossShards: with two shards running at once, the first
// StopAfter errors to reach the coordinator, from either shard, stop the
// variant; a trial already running when it stops runs to its end, so the
// variant has StopAfter errored trials plus at most one (two shards of one
// trial at a time), and the rest skipped.
func TestStopAcrossShards(t *testing.T) {
	t.Parallel()
	_, got := runStopEval(t, down, "", 2, 1)
	s := statuses(got["claude"])
	if errored := s["errored (provider)"]; errored < run.StopAfter || errored > run.StopAfter+1 || errored+s[transcript.Skipped] != 6 {
		t.Errorf("claude over two shards, its provider answering 401: outcomes %v, want %d or %d errored (provider) and the rest skipped", s, run.StopAfter, run.StopAfter+1)
	}
	if diff := cmp.Diff(map[string]int{transcript.Answered: 6}, statuses(got["offline"])); diff != "" {
		t.Errorf("offline over two shards: outcomes (-want +got):\n%s", diff)
	}
}

// TestStopNotWhenErrorsMixed: a variant whose first trials errored with a
// provider cause and whose next answered is never stopped, and neither is
// one whose trials all errored with a server cause (the server crashes
// on every case: that may be one machine's problem).
func TestStopNotWhenErrorsMixed(t *testing.T) {
	t.Parallel()
	// The first StopAfter-1 requests fail, the rest are answered.
	script := providertest.Script{
		Faults:        []providertest.Fault{{Status: 401, Times: run.StopAfter - 1, Message: "invalid x-api-key"}},
		Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "done"}}}},
	}
	_, got := runStopEval(t, script, "", 1, 1)
	want := map[string]int{"errored (provider)": run.StopAfter - 1, transcript.Answered: 6 - (run.StopAfter - 1)}
	if diff := cmp.Diff(want, statuses(got["claude"])); diff != "" {
		t.Errorf("claude, its first %d trials errored, then answered: outcomes (-want +got):\n%s", run.StopAfter-1, diff)
	}
}

// TestStopNotForServerErrors: trials that all error because the server
// crashes never stop their variant: a server's failure may be one
// machine's problem.
func TestStopNotForServerErrors(t *testing.T) {
	t.Parallel()
	var cases strings.Builder
	for i := range 6 {
		fmt.Fprintf(&cases, `{"id": "boom%d", "input": "crash the server process now"}`+"\n", i)
	}
	_, got := runStopEval(t, providertest.Script{}, cases.String(), 1, 1)
	if diff := cmp.Diff(map[string]int{"errored (server)": 6}, statuses(got["offline"])); diff != "" {
		t.Errorf("offline, the server crashing on every case: outcomes (-want +got):\n%s", diff)
	}
}

// outcome is one trial's end, as StopGate.Observe takes it.
type outcome struct{ status, cause string }

var (
	errProvider = outcome{transcript.Errored, transcript.CauseProvider}
	errClient   = outcome{transcript.Errored, transcript.CauseClient}
	errServer   = outcome{transcript.Errored, transcript.CauseServer}
	errRunner   = outcome{transcript.Errored, transcript.CauseRunner}
	answered    = outcome{transcript.Answered, ""}
)

// TestStopGateRules feeds the gate one variant's trial ends in the order
// they reach the coordinator, and checks whether the variant is stopped,
// for each kind of beginning.
func TestStopGateRules(t *testing.T) {
	t.Parallel()
	n := run.StopAfter
	repeat := func(o outcome, k int) []outcome {
		var out []outcome
		for range k {
			out = append(out, o)
		}
		return out
	}
	then := func(parts ...[]outcome) []outcome {
		var out []outcome
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		ends  []outcome
		cause string // the cause it stops for, "" when it must not stop
	}{
		{"the first trials errored (provider)", repeat(errProvider, n), transcript.CauseProvider},
		{"the first trials errored (client)", repeat(errClient, n), transcript.CauseClient},
		{"more errors than needed", repeat(errProvider, n+4), transcript.CauseProvider},
		{"one error short", repeat(errProvider, n-1), ""},
		{"server errors", repeat(errServer, n+2), ""},
		{"runner errors", repeat(errRunner, n+2), ""},
		{"provider and client errors mixed", then(repeat(errProvider, n-1), []outcome{errClient}, repeat(errProvider, n)), ""},
		{"an answer among the first", then(repeat(errProvider, n-1), []outcome{answered}, repeat(errProvider, n+2)), ""},
		{"an answer first", then([]outcome{answered}, repeat(errProvider, n+2)), ""},
		{"a timeout among the first", then([]outcome{errProvider, {transcript.TimedOut, ""}}, repeat(errProvider, n+2)), ""},
		{"no answer among the first", then([]outcome{{transcript.NoAnswer, ""}}, repeat(errClient, n+2)), ""},
		{"cancelled and skipped trials do not count", then([]outcome{errProvider, {transcript.Cancelled, ""}, {transcript.Skipped, "x"}}, repeat(errProvider, n-1)), transcript.CauseProvider},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := run.NewStopGate("run-1", nil)
			other := transcript.Key{Case: "a", Variant: "other", Trial: 1}
			for i, e := range tc.ends {
				g.Observe("v", e.status, e.cause, fmt.Sprintf("failure %d", i))
			}
			reason := g.Admit(transcript.Key{Case: "a", Variant: "v", Trial: 1})
			if skip := g.Admit(other); skip != "" {
				t.Errorf("Admit(another variant) = %q, want it to run", skip)
			}
			stopped := g.Stopped()
			if tc.cause == "" {
				if reason != "" || len(stopped) != 0 {
					t.Errorf("after %v: Admit = %q, Stopped = %+v, want the variant running", tc.ends, reason, stopped)
				}
				return
			}
			want := []run.StoppedVariant{{Variant: "v", Cause: tc.cause, Detail: "failure 0", Reason: reason}}
			if diff := cmp.Diff(want, stopped); diff != "" {
				t.Errorf("after %v: Stopped (-want +got):\n%s", tc.ends, diff)
			}
			wantReason := fmt.Sprintf("variant v stopped: its first %d trials all errored (%s: failure 0); the other variants kept running. Once the cause is fixed, a resume of run run-1 runs the skipped trials (mst run prints the command)", n, tc.cause)
			if reason != wantReason {
				t.Errorf("after %v: Admit = %q, want %q", tc.ends, reason, wantReason)
			}
		})
	}
}

// TestStopGateQuotesSafely: the error a stop reason quotes is redacted,
// cut to its first line and kept short.
func TestStopGateQuotesSafely(t *testing.T) {
	t.Parallel()
	keys := secrets.New()
	if err := keys.Add("ANTHROPIC_API_KEY", "sk-canary-value"); err != nil {
		t.Fatal(err)
	}
	g := run.NewStopGate("r", secrets.NewRedactor(keys))
	long := strings.Repeat("x", 1000)
	g.Observe("v", transcript.Errored, transcript.CauseProvider, "401: bad key sk-canary-value "+long+"\nsecond line")
	for range run.StopAfter - 1 {
		g.Observe("v", transcript.Errored, transcript.CauseProvider, "")
	}
	s := g.Stopped()
	if len(s) != 1 {
		t.Fatalf("Stopped = %+v, want v", s)
	}
	d := s[0].Detail
	if strings.Contains(d, "sk-canary-value") || !strings.Contains(d, "401: bad key [redacted:ANTHROPIC_API_KEY]") || strings.Contains(d, "second line") || len([]rune(d)) > 201 {
		t.Errorf("Detail = %q, want the first line, redacted, at most 200 characters and an ellipsis", d)
	}
	if !strings.Contains(s[0].Reason, d) {
		t.Errorf("Reason = %q, want it to quote the detail", s[0].Reason)
	}
}
