//go:build linux

package run_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// TestGradeRunnerAdvisoryJudge grades a stored run with mst grade --runner
// processes on two grade shards, with a deterministic grader, a judge
// that decides (gate: true) and an advisory judge (gate: false), each
// passing some trials and failing others:
//
//   - a: every gating grader passes, the advisory judge fails: passed;
//   - b: the gating judge fails: failed;
//   - c: the case's own answerContains fails: failed;
//   - d: everything passes: passed.
//
// Every trial comes back graded (the coordinator takes a pass that an
// advisory judge scored low), each with the verdict grading here gives,
// and the advisory judge's results are stored as advisory.
func TestGradeRunnerAdvisoryJudge(t *testing.T) {
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
		providertest.JudgeConversation("Please echo 'word 1'", providertest.JudgeReply{Verdict: "fail", Score: 1, Rationale: "wrong word"}.Turn()),
		providertest.JudgeConversation("Please echo 'word 3'", providertest.JudgeReply{Verdict: "pass", Score: 5, Rationale: "all good"}.Turn()),
		providertest.JudgeConversation("ADVISORY-RUBRIC", providertest.JudgeReply{Verdict: "fail", Score: 2, Rationale: "not witty"}.Turn()),
		providertest.JudgeConversation("", providertest.JudgeReply{Verdict: "pass", Score: 4, Rationale: "echoed"}.Turn()),
	}})
	var cases strings.Builder
	for i, id := range []string{"a", "b", "c", "d"} {
		expect := ""
		if id == "c" {
			expect = `, "expect": [{"answerContains": "no-such-text-7f3e"}]`
		}
		fmt.Fprintf(&cases, `{"id": %q, "input": "Please echo 'word %d'"%s}`+"\n", id, i, expect)
	}
	eval := writeEval(t, map[string]string{
		"eval.yaml": `
name: advisory
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
trials: 2
graders:
  - toolCalled: echo
  - judge: {name: gating, criteria: "GATING-RUBRIC: the answer echoes the word.", model: anthropic/claude-judge, baseURL: "` + fake.URL + `", apiKeyEnv: JUDGE_KEY}
  - judge: {name: advisory, criteria: "ADVISORY-RUBRIC: the answer is witty.", model: anthropic/claude-judge, baseURL: "` + fake.URL + `", apiKeyEnv: JUDGE_KEY, gate: false}
`,
		"cases.jsonl": cases.String(),
	})
	set := secrets.New()
	set.Add("JUDGE_KEY", "judge-key-advisory-5d21")
	p, o, _, printed := canaryRun(t, eval, set)
	p.NoGrade = true // collect only; graded on the runner below
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	if c := out.Run.Counts; c.Answered != 8 {
		t.Fatalf("%d of 8 trials answered (%+v): %s", c.Answered, c, out.Run.Note)
	}
	st, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Regrade(t.Context(), st, run.RegradeOptions{Graders: p.Config.Graders, On: &run.GradeOn{
		Runner:  runner.ProcessesDefinition(),
		Chosen:  run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: 2, Keep: runner.KeepNever},
		Secrets: run.OnlyNames(set, p.JudgeKeys()),
		MST:     o.MST, MSTVersion: o.MSTVersion, Logger: o.Logger,
	}})
	if err != nil {
		t.Fatalf("Regrade on processes = %v\n%s", err, printed.String())
	}
	if strings.Contains(printed.String(), "refused a grade") {
		t.Errorf("the coordinator refused grades:\n%s", printed.String())
	}
	if res.Graded != 8 {
		t.Errorf("Regrade graded %d trials on the runner, want 8", res.Graded)
	}
	log, err := st.GradeSet(t.Context(), res.Set.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantPass := map[string]bool{"a": true, "b": false, "c": false, "d": true}
	wantAdvisory := map[string]bool{"a": false, "b": false, "c": false, "d": true} // the advisory judge's verdict
	seen := 0
	err = log.Grades(t.Context(), func(g grade.TrialGrade) error {
		seen++
		if !g.Graded || g.Passed != wantPass[g.Key.Case] {
			t.Errorf("%s: graded %v, passed %v; want graded, passed %v (results %+v)", g.Key, g.Graded, g.Passed, wantPass[g.Key.Case], g.Results)
		}
		var advisory []grade.Result
		for _, r := range g.Results {
			if r.Advisory {
				advisory = append(advisory, r)
			}
		}
		if len(advisory) != 1 || advisory[0].Grader != "judge advisory by anthropic/claude-judge" || advisory[0].Passed != wantAdvisory[g.Key.Case] || advisory[0].Judge == nil {
			t.Errorf("%s: advisory results %+v, want the advisory judge's, passed %v", g.Key, advisory, wantAdvisory[g.Key.Case])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 8 {
		t.Errorf("the grade set holds %d grades, want 8", seen)
	}
	v := res.Report.Variants[0]
	if v.Graded != 8 || v.Passed != 4 {
		t.Errorf("report: %d of %d graded trials passed, want 4 of 8", v.Passed, v.Graded)
	}
}
