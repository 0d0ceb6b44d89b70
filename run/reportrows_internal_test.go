package run

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/report"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestReportRowsLikeGather stores random runs twice over (trials with a
// transcript, without one, or with a damaged one; grade logs with current,
// superseded and old-form grades, grades repeated, grades of trials the run
// did not plan) and reports one copy with reportRows, which keeps a few
// bytes per planned trial, and the other with gather, which keeps maps of
// keys: the rows, what each variant ran as, and the grades stored after
// are the same.
func TestReportRowsLikeGather(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rec := transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "r", Variants: []string{"v-b", "V a"}, Trials: 2, Collect: transcript.CollectComplete}
			cases := []dataset.Case{{ID: "c2", Input: "x"}, {ID: "C 1", Input: "x", Expect: []json.RawMessage{json.RawMessage(`{"maxToolCalls": 0}`)}}, {ID: "c0", Input: "x"}}
			byCase, err := caseGraders([]json.RawMessage{json.RawMessage(`{"maxToolCalls": 3}`)}, cases, "test")
			if err != nil {
				t.Fatal(err)
			}
			how := grading{graders: func(id string) []grade.Grader { return byCase[id] }, workers: 2}
			var planned []transcript.Key
			for _, c := range cases {
				for _, v := range rec.Variants {
					for i := 1; i <= rec.Trials; i++ {
						planned = append(planned, transcript.Key{Case: c.ID, Variant: v, Trial: i})
					}
				}
			}
			keys := append(planned, transcript.Key{Case: "unplanned", Variant: "v-b", Trial: 1}, transcript.Key{Case: "c0", Variant: "v-b", Trial: 3})
			var runs [2]*store.DirRun
			for i := range runs {
				runs[i] = store.OpenDir(t.TempDir(), nil)
			}
			rng := rand.New(rand.NewPCG(seed, 1))
			ended := time.Unix(1764000000, 0).UTC()
			for _, k := range keys {
				what := rng.IntN(4) // 0: none, 1: damaged, else stored
				tr := &transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Run: "r", Key: k,
					Client: transcript.ClientInfo{Name: []string{"api", "codex-cli"}[rng.IntN(2)]}, Model: "m",
					ToolCalls: make([]transcript.ToolCall, rng.IntN(3)), Answer: "a",
					Outcome: transcript.Outcome{Status: []string{transcript.Answered, transcript.Errored}[rng.IntN(2)], Cause: transcript.CauseClient},
					Timing:  transcript.Timing{Started: ended.Add(-time.Second), Ended: ended, DurationMs: float64(rng.IntN(900))}}
				for _, r := range runs {
					if what == 0 {
						continue
					}
					rel, err := r.WriteTranscript(ctx, tr)
					if err != nil {
						t.Fatal(err)
					}
					if what == 1 {
						// Whole to look at, but not a transcript.
						if err := os.WriteFile(filepath.Join(r.Location(), filepath.FromSlash(rel)), []byte(`{"kind": }`), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			for range rng.IntN(3 * len(keys)) {
				g := grade.TrialGrade{Key: keys[rng.IntN(len(keys))], Graded: rng.IntN(3) > 0, Passed: rng.IntN(2) == 0, Superseded: rng.IntN(6) == 0}
				g.Results = []grade.Result{{Grader: "judge", Passed: g.Passed, Detail: "words", Judge: &grade.Verdict{Hash: "h", Model: "jm", Verdict: "pass", Score: float64(rng.IntN(5)), Rationale: "long words"}}}
				if rng.IntN(4) > 0 {
					g.Trial = grade.Summary{Status: transcript.Answered, Client: []string{"", "api", "claude-code"}[rng.IntN(3)], Model: fmt.Sprint("m", rng.IntN(2)), Ended: ended, ToolCalls: rng.IntN(3)}
				}
				for _, r := range runs {
					if err := r.AppendGrades(ctx, g); err != nil {
						t.Fatal(err)
					}
				}
			}
			rows, ran, err := reportRows(ctx, runs[0], runs[0], rec, cases, how)
			if err != nil {
				t.Fatal(err)
			}
			g, err := gather(ctx, runs[1], runs[1], planned, how, nil, func(error) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(g.trials, rows, cmp.Comparer(func(a, b []report.JudgeScore) bool { return cmp.Equal(a, b) })); diff != "" {
				t.Errorf("rows differ from gather's (-gather +reportRows):\n%s", diff)
			}
			for _, v := range rec.Variants {
				s, ok := g.seen[v]
				if r := ran[v]; r != (ranAs{s.Client, s.Model}) || ok != (r != ranAs{}) {
					t.Errorf("variant %s ran as %+v, gather says %+v (%v)", v, r, s, ok)
				}
			}
			var stored [2]map[transcript.Key]grade.TrialGrade
			for i, r := range runs {
				stored[i] = map[transcript.Key]grade.TrialGrade{}
				if err := r.Grades(ctx, func(g grade.TrialGrade) error { stored[i][g.Key] = g; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(stored[1], stored[0]); diff != "" {
				t.Errorf("grades stored after differ from gather's (-gather +reportRows):\n%s", diff)
			}
		})
	}
}
