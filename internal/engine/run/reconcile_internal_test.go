package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestReconcileLikeMaps stores random runs twice over (trials with a
// transcript, without one, or with a damaged one; grade logs with current,
// superseded and old-form grades, grades repeated, grades of trials the run
// did not plan) and reads one copy back with reconcile, which keeps a few
// bytes per planned trial and reads the grade log twice, and the other
// with gatherByMaps, which keeps maps of keys: the rows (each given once),
// what each variant ran as, and the grades stored after are the same.
func TestReconcileLikeMaps(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rec := transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "r", Variants: []string{"v-b", "V a"}, Trials: 2, Collect: transcript.CollectComplete}
			cases := []dataset.Case{{ID: "c2", Input: "x"}, {ID: "C 1", Input: "x", Expect: []json.RawMessage{json.RawMessage(`{"maxToolCalls": 0}`)}}, {ID: "c0", Input: "x"}}
			byCase, err := caseGraders(nil, []json.RawMessage{json.RawMessage(`{"maxToolCalls": 3}`)}, cases, "test")
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
			var rows []report.Trial
			given := map[int]int{}
			res, err := reconcile(ctx, runs[0], runs[0], newPlanIndex(rec, cases), cases, how, nil, func(s int, tr report.Trial) {
				given[s]++
				rows = append(rows, tr)
			})
			if err != nil {
				t.Fatal(err)
			}
			for s, n := range given {
				if n != 1 {
					t.Errorf("slot %d was given %d rows, want 1", s, n)
				}
			}
			sort.Slice(rows, func(i, j int) bool { return keyLess(rows[i].Key, rows[j].Key) })
			ran := res.ran
			g, err := gatherByMaps(ctx, runs[1], runs[1], planned, how, nil, func(error) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(g.trials, rows, cmp.Comparer(func(a, b []report.JudgeScore) bool { return cmp.Equal(a, b) })); diff != "" {
				t.Errorf("rows differ from the maps' (-maps +reconcile):\n%s", diff)
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
				t.Errorf("grades stored after differ from the maps' (-maps +reconcile):\n%s", diff)
			}
		})
	}
}

type gathered struct {
	counts transcript.Counts
	trials []report.Trial
	// seen is, per variant, the summary of its first trial that names its
	// client: what the variant ran as.
	seen map[string]grade.Summary
}

// gatherByMaps is how runs were read back before reconcile, kept here as
// the plain reference reconcile must agree with. It reconciles the store: it grades every planned trial that has a
// transcript and no grade of it yet (a crash between the two, a run from an
// older MST), appends those grades, and returns the counts and the report's
// records from the grades. replaced are trials whose transcript was
// replaced in this attempt: their grade must be of the transcript stored
// now. Transcripts of trials the run did not plan are ignored.
//
// keepGrades says what to do when the new grades cannot be stored: Execute
// fails, while a report of a run in a folder it cannot write to (an
// archive) is still right, only not remembered.
func gatherByMaps(ctx context.Context, st store.Run, set store.Grades, planned []transcript.Key, how grading, replaced map[transcript.Key]bool, keepGrades func(error) error) (gathered, error) {
	var g gathered
	want := make(map[transcript.Key]bool, len(planned))
	for _, k := range planned {
		want[k] = true
	}
	grades := map[transcript.Key]grade.TrialGrade{}
	err := set.Grades(ctx, func(tg grade.TrialGrade) error {
		if want[tg.Key] {
			grades[tg.Key] = slim(tg)
		}
		return nil
	})
	if err != nil {
		return g, err
	}
	keys, err := st.Keys(ctx)
	if err != nil {
		return g, err
	}
	var fresh []grade.TrialGrade
	damaged := map[transcript.Key]bool{}
	var need []transcript.Key
	for _, k := range keys {
		if !want[k] {
			continue
		}
		old, ok := grades[k]
		current := ok && !old.Superseded && old.Trial.Status != ""
		if current && !replaced[k] {
			continue
		}
		need = append(need, k)
	}
	var mu sync.Mutex // guards damaged while the transcripts are read
	read := func(k transcript.Key) (*transcript.Transcript, error) {
		t, err := st.ReadTranscript(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			mu.Lock()
			damaged[k] = true // cut short: the trial is missing
			mu.Unlock()
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		old, ok := grades[k]
		if ok && !old.Superseded && old.Trial.Status != "" && old.Trial.Ended.Equal(t.Timing.Ended) {
			return nil, nil // the grade is of this transcript
		}
		return t, nil
	}
	made := map[transcript.Key]grade.TrialGrade{}
	err = gradeAll(ctx, how, need, read, func(ng grade.TrialGrade, keep bool) error {
		old, ok := grades[ng.Key]
		if keep && ok && !old.Superseded && old.Trial.Status == "" {
			// A grade from before grades held the transcript's summary:
			// keep its verdict, add the summary.
			ng.Graded, ng.Passed, ng.Results = old.Graded, old.Passed, old.Results
		}
		made[ng.Key] = slim(ng)
		if keep {
			fresh = append(fresh, ng)
		}
		return nil
	})
	if err != nil {
		return g, err
	}
	maps.Copy(grades, made)
	if len(fresh) > 0 {
		if err := set.AppendGrades(ctx, fresh...); err != nil {
			if err := keepGrades(err); err != nil {
				return g, err
			}
		}
	}
	g.counts.Planned = len(planned)
	have := map[transcript.Key]bool{}
	for _, k := range keys {
		have[k] = !damaged[k]
	}
	for _, k := range planned {
		tg, ok := grades[k]
		if !ok || !have[k] {
			continue
		}
		g.counts.Add(tg.Trial.Status)
		g.trials = append(g.trials, report.NewTrial(tg))
		if _, ok := g.seen[k.Variant]; !ok && tg.Trial.Client != "" {
			if g.seen == nil {
				g.seen = map[string]grade.Summary{}
			}
			g.seen[k.Variant] = tg.Trial
		}
	}
	g.counts.Missing = g.counts.Planned - g.counts.Done()
	sort.Slice(g.trials, func(i, j int) bool { return keyLess(g.trials[i].Key, g.trials[j].Key) })
	return g, nil
}

// slim keeps of a grade what gather and the report read, so a run's
// grades held at once take little memory: the results only of a grade
// from before grades held the transcript's summary (its verdict is kept),
// and otherwise only the judges' results, without their words.
func slim(g grade.TrialGrade) grade.TrialGrade {
	if g.Trial.Status == "" {
		return g
	}
	var kept []grade.Result
	for _, r := range g.Results {
		if r.Judge == nil {
			continue
		}
		v := *r.Judge
		v.Rationale = ""
		if r.Error != "" {
			r.Error = "errored"
		}
		r.Detail, r.Judge = "", &v
		kept = append(kept, r)
	}
	g.Results = kept
	return g
}

func keyLess(a, b transcript.Key) bool {
	if a.Variant != b.Variant {
		return a.Variant < b.Variant
	}
	if a.Case != b.Case {
		return a.Case < b.Case
	}
	return a.Trial < b.Trial
}
