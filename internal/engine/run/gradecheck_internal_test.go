package run

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/transcript"
)

// The coordinator's check of a grade worker's grade agrees with
// grade.TrialContext on what an advisory judge (gate: false) means: its
// low score or its error leaves a passed trial passed, while a grader that
// decides the trial and failed it, or gave no verdict, cannot be part of a
// pass.
func TestGradeCheckAdvisory(t *testing.T) {
	t.Parallel()
	key := transcript.Key{Case: "a", Variant: "v", Trial: 1}
	events := &gradeEvents{facts: map[transcript.Key]grade.Summary{key: {Status: transcript.Answered}}}
	gating := grade.Result{Grader: "toolCalled echo", Passed: true}
	lowAdvisory := grade.Result{Grader: "judge polite by offline", Advisory: true, Detail: "the judge gave 1/5",
		Judge: &grade.Verdict{Verdict: "fail", Score: 1, Scale: grade.Scale{Min: 1, Max: 5}}}
	erroredAdvisory := grade.Result{Grader: "judge polite by offline", Advisory: true, Error: "the judge model failed"}
	for _, tc := range []struct {
		name string
		g    grade.TrialGrade
		want string // "" when the grade is taken
	}{
		{"passed, advisory judge scored low",
			grade.TrialGrade{Graded: true, Passed: true, Results: []grade.Result{gating, lowAdvisory}}, ""},
		{"passed, advisory judge errored",
			grade.TrialGrade{Graded: true, Passed: true, Results: []grade.Result{gating, erroredAdvisory}}, ""},
		{"failed by a gating grader, advisory judge scored low",
			grade.TrialGrade{Graded: true, Results: []grade.Result{{Grader: "toolCalled echo", Detail: "not called"}, lowAdvisory}}, ""},
		{"passed although a gating grader failed",
			grade.TrialGrade{Graded: true, Passed: true, Results: []grade.Result{{Grader: "toolCalled echo", Detail: "not called"}, lowAdvisory}},
			"grader toolCalled echo failed it"},
		{"passed although a gating judge failed",
			grade.TrialGrade{Graded: true, Passed: true, Results: []grade.Result{gating, {Grader: "judge correct by offline", Detail: "the judge gave 2/5"}}},
			"grader judge correct by offline failed it"},
		{"passed although a gating judge gave no verdict",
			grade.TrialGrade{Graded: true, Passed: true, Results: []grade.Result{gating, {Grader: "judge correct by offline", Error: "refused"}}},
			"gave no verdict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.g.Key = key
			// What the worker's own grading says of the same results.
			worker := transcript.Transcript{Key: key, Outcome: transcript.Outcome{Status: transcript.Answered}}
			graders := make([]grade.Grader, len(tc.g.Results))
			for i, r := range tc.g.Results {
				graders[i] = fixedGrader{r}
			}
			byWorker := grade.Trial(&worker, graders)
			data, err := json.Marshal(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			got, err := events.check(&protocol.Graded{Key: key, Path: "x"}, data)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("check(%s) = %v, want the grade taken", tc.name, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("check(%s) = %v, want an error saying %q", tc.name, err, tc.want)
			case tc.want == "" && got.Passed != tc.g.Passed:
				t.Errorf("check(%s) took Passed = %v, want %v", tc.name, got.Passed, tc.g.Passed)
			}
			// A grade the worker's grading makes is always taken.
			if tc.want == "" && byWorker.Passed != tc.g.Passed {
				t.Errorf("grade.Trial of the same results passes = %v, the fixture says %v", byWorker.Passed, tc.g.Passed)
			}
			if data, _ := json.Marshal(byWorker); byWorker.Graded {
				if _, err := events.check(&protocol.Graded{Key: key, Path: "x"}, data); err != nil {
					t.Errorf("check refuses what grade.Trial made of the same results: %v", err)
				}
			}
		})
	}
}

// fixedGrader gives the same result to every transcript.
type fixedGrader struct{ r grade.Result }

func (f fixedGrader) Name() string                              { return f.r.Grader }
func (f fixedGrader) Grade(*transcript.Transcript) grade.Result { return f.r }
