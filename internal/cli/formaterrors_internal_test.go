package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport"
	"github.com/mst-eval/mst/transcript"
)

// TestNoFormattingErrors writes every output a run's results are shown
// in (the text report at full and narrow width, Markdown, JSON, JUnit,
// the HTML page, mst show, --failures, and the comparisons of runs and of
// grade sets) from a report, run record, transcript and grades in which
// every optional field is set, and from ones in which every one is
// empty: none holds a Go formatting error ("%!f(*float64=…)", "%!d(…)",
// "%!v(MISSING)"), which is what a verb given the wrong type or a missing
// argument prints.
func TestNoFormattingErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rep  report.Report
		rec  transcript.Run
		tr   *transcript.Transcript
	}{
		{"every field set", fullReport(t), *filled(t, transcript.Run{ID: "run-full", Variants: []string{"terse", "clear"}, Trials: 3}), filled(t, transcript.Transcript{})},
		{"every field empty", report.Build(report.Input{Run: transcript.Run{ID: "run-empty", Variants: []string{"a", "b"}, Trials: 1}, Cases: []string{}}), transcript.Run{}, &transcript.Transcript{}},
		{"zero values", report.Report{}, transcript.Run{}, &transcript.Transcript{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			grades := gradesOf(tc.rep)
			src := &fixedSource{grades: grades}
			for _, g := range grades {
				tr := *tc.tr
				tr.Key = g.Key
				src.transcripts = append(src.transcripts, &tr)
			}
			outputs := map[string]func(w *bytes.Buffer) error{
				"text":          func(w *bytes.Buffer) error { return tc.rep.WriteText(w) },
				"text, 40 wide": func(w *bytes.Buffer) error { return tc.rep.WriteTextWidth(w, 40) },
				"markdown":      func(w *bytes.Buffer) error { return tc.rep.WriteMarkdown(w, report.Verdict{}) },
				"markdown gated": func(w *bytes.Buffer) error {
					return tc.rep.WriteMarkdown(w, report.Verdict{Checked: true, Failed: []string{"pass rate 10% < 50%"}})
				},
				"json":  func(w *bytes.Buffer) error { return json.NewEncoder(w).Encode(tc.rep) },
				"junit": func(w *bytes.Buffer) error { return tc.rep.WriteJUnit(w, grades) },
				"html": func(w *bytes.Buffer) error {
					return htmlreport.Write(context.Background(), w, tc.rep, tc.rec, src)
				},
				"--failures":          func(w *bytes.Buffer) error { return tc.rep.WriteFailures(w, grades, 0) },
				"--failures, 40 wide": func(w *bytes.Buffer) error { return tc.rep.WriteFailures(w, grades, 40) },
				"compare runs": func(w *bytes.Buffer) error {
					return report.CompareRuns(tc.rep, tc.rep, report.ToolHashes{}, report.ToolHashes{}).WriteText(w)
				},
				"compare runs, md": func(w *bytes.Buffer) error {
					return report.CompareRuns(tc.rep, tc.rep, report.ToolHashes{}, report.ToolHashes{}).WriteMarkdown(w, report.Verdict{})
				},
				"compare grades": func(w *bytes.Buffer) error { return report.CompareGradeSets(tc.rep, tc.rep, grades, nil).WriteText(w) },
				"compare grades, md": func(w *bytes.Buffer) error {
					return report.CompareGradeSets(tc.rep, tc.rep, grades, nil).WriteMarkdown(w, report.Verdict{})
				},
				"show, not graded yet": func(w *bytes.Buffer) error { return writeTranscript(w, tc.tr, nil) },
			}
			for i, g := range grades[:min(len(grades), len(gradeKinds))] {
				outputs[fmt.Sprintf("show, grade %d", i)] = func(w *bytes.Buffer) error { return writeTranscript(w, tc.tr, &g) }
			}
			for name, write := range outputs {
				var buf bytes.Buffer
				if err := write(&buf); err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if i := strings.Index(buf.String(), "%!"); i >= 0 {
					s := buf.String()
					t.Errorf("%s holds a formatting error: %q", name, s[max(0, i-100):min(len(s), i+100)])
				}
			}
		})
	}
}

// gradeKinds are the grades gradesOf gives the trials of a report, in
// turn: passed with an advisory judge that failed; failed by a grader
// that decides, beside an advisory judge that could not judge; failed
// for its outcome; errored by a judge that decides; not graded.
var gradeKinds = []func(g *grade.TrialGrade){
	func(g *grade.TrialGrade) {
		g.Graded, g.Passed = true, true
		g.Results = []grade.Result{{Grader: "toolCalled echo", Passed: true}, judgeResult(true, false)}
	},
	func(g *grade.TrialGrade) {
		g.Graded = true
		g.Results = []grade.Result{{Grader: "toolCalled echo", Detail: "echo was called 0 times"}, judgeResult(true, true)}
	},
	func(g *grade.TrialGrade) {
		g.Graded, g.Trial.Status = true, transcript.NoAnswer
		g.Failed = "the trial ended no-answer, without an answer; only an answered trial can pass"
		g.Results = []grade.Result{{Grader: "toolCalled echo", Passed: true}, judgeResult(false, false)}
	},
	func(g *grade.TrialGrade) {
		g.Errored = "judge correct by offline: the judge model refused"
		g.Results = []grade.Result{{Grader: "toolCalled echo", Passed: true}, judgeResult(false, true)}
	},
	func(g *grade.TrialGrade) {
		g.Trial.Status, g.Trial.Cause, g.Trial.Detail = transcript.Errored, transcript.CauseServer, "the server crashed"
	},
}

// judgeResult is a judge's result that failed the trial, or gave no
// verdict (errored).
func judgeResult(advisory, errored bool) grade.Result {
	r := grade.Result{Grader: "judge correct by offline", Advisory: advisory, Detail: "the judge gave 1/5: curt",
		Judge: &grade.Verdict{Hash: "5ca1ab1e0042", Model: "offline", Verdict: "fail", Score: 1, Scale: grade.Scale{Min: 1, Max: 5}, Rationale: "curt", InputTokens: 9, OutputTokens: 3}}
	if errored {
		r.Detail, r.Error = "", "the judge model refused"
		r.Judge = &grade.Verdict{Hash: r.Judge.Hash, Model: r.Judge.Model, Scale: r.Judge.Scale}
	}
	return r
}

// gradesOf grades every planned trial of rep, each with the next of
// gradeKinds.
func gradesOf(rep report.Report) []grade.TrialGrade {
	var out []grade.TrialGrade
	for _, c := range rep.Cases {
		for _, v := range rep.Variants {
			for n := 1; n <= rep.Run.TrialsPerCase; n++ {
				g := grade.TrialGrade{Key: transcript.Key{Case: c.Case, Variant: v.Variant, Trial: n},
					Trial: grade.Summary{Status: transcript.Answered, Client: "api", Model: "offline", InputTokens: 10, OutputTokens: 5, DurationMs: 12.5, ToolCalls: 1,
						Ended: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}}
				gradeKinds[len(out)%len(gradeKinds)](&g)
				out = append(out, g)
			}
		}
	}
	return out
}

// fullReport is the report of a run whose trials have every grade of
// gradeKinds, with every field Build left empty (a note, an ignored
// trial, shard counts, anything added later) then set by filled.
func fullReport(t *testing.T) report.Report {
	t.Helper()
	rec := transcript.Run{ID: "run-full", Eval: "quickstart", Collect: transcript.CollectPartial, Note: "stopped",
		Variants: []string{"terse", "clear"}, Cases: 4, Trials: 3}
	in := report.Input{Run: rec, Cases: []string{"a", "b", "c", "d"},
		Variants: []report.VariantInfo{{Name: "terse", Client: "api", Model: "offline", Description: "as shipped"}, {Name: "clear", Client: "api", Model: "offline", Description: "rewritten"}},
		GradeSet: &report.GradeSetInfo{ID: "2", Sets: 2, By: "mst grade", Created: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), GradersFile: "judges.yaml"}}
	skeleton := report.Build(in)
	for _, g := range gradesOf(skeleton) {
		tr := report.NewTrial(g)
		tr.Judges = append(tr.Judges, report.JudgeScore{Grader: "judge polite by offline", Hash: "0badc0ffee", Model: "offline", Score: float64(1 + len(in.Trials)%5), Scale: grade.Scale{Min: 1, Max: 5}, Passed: len(in.Trials)%2 == 0})
		in.Trials = append(in.Trials, tr)
	}
	in.Trials = append(in.Trials, report.Trial{Key: transcript.Key{Case: "outside", Variant: "terse", Trial: 1}, Status: transcript.Answered})
	return *filled(t, report.Build(in))
}

// filled returns v with every field that is empty (a nil pointer, slice
// or map, a zero number, an empty string, a zero time), at any depth, set
// to a value; booleans are left as they are, as they choose what is
// shown rather than hold what is shown.
func filled[T any](t *testing.T, v T) *T {
	t.Helper()
	fill(reflect.ValueOf(&v).Elem(), 0)
	return &v
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

func fill(v reflect.Value, depth int) {
	if depth > 8 || !v.CanSet() {
		return
	}
	switch {
	case v.Type() == timeType:
		if v.Interface().(time.Time).IsZero() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)))
		}
		return
	case v.Type() == rawType:
		if v.Len() == 0 {
			v.Set(reflect.ValueOf(json.RawMessage(`{"city":"Oslo"}`)))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			v.SetString("set")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			v.SetInt(2)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Uint() == 0 {
			v.SetUint(2)
		}
	case reflect.Float32, reflect.Float64:
		if v.Float() == 0 {
			v.SetFloat(0.25)
		}
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.Len() == 0 && v.Type().Key().Kind() == reflect.String {
			m := reflect.MakeMap(v.Type())
			val := reflect.New(v.Type().Elem()).Elem()
			fill(val, depth+1)
			m.SetMapIndex(reflect.ValueOf("set").Convert(v.Type().Key()), val)
			v.Set(m)
		}
	}
}

// fixedSource is a run's grades and transcripts held in memory.
type fixedSource struct {
	grades      []grade.TrialGrade
	transcripts []*transcript.Transcript
}

func (s *fixedSource) Grades(ctx context.Context, fn func(grade.TrialGrade) error) error {
	for _, g := range s.grades {
		if err := fn(g); err != nil {
			return err
		}
	}
	return nil
}

func (s *fixedSource) Transcripts(ctx context.Context, fn func(*transcript.Transcript) error) error {
	for _, t := range s.transcripts {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}
