package report

import (
	"math"
	"strings"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// judged is an answered trial graded by judges, each giving a score, or
// errored when its score is NaN.
func judged(c, v string, trial int, scores map[string]float64) Trial {
	g := grade.TrialGrade{Key: transcript.Key{Case: c, Variant: v, Trial: trial}, Graded: true, Passed: true, Trial: grade.Summary{Status: transcript.Answered}}
	for name, s := range scores {
		r := grade.Result{Grader: "judge " + name, Judge: &grade.Verdict{Hash: name + "-hash", Model: "offline", Scale: grade.Scale{Min: 1, Max: 5}}}
		if math.IsNaN(s) {
			r.Error = "the judge model failed"
			g.Graded, g.Passed, g.Errored = false, false, r.Grader+": "+r.Error
		} else {
			r.Judge.Verdict, r.Judge.Score, r.Passed = "pass", s, s >= 3
		}
		g.Results = append(g.Results, r)
	}
	return NewTrial(g)
}

func TestJudgeStats(t *testing.T) {
	in := Input{Run: transcript.Run{ID: "r", Variants: []string{"v"}, Trials: 2}, Cases: []string{"a", "b", "c"}}
	scores := map[string][2]float64{"a": {1, 2}, "b": {4, 4}, "c": {5, math.NaN()}}
	for c, s := range scores {
		for i, x := range s {
			in.Trials = append(in.Trials, judged(c, "v", i+1, map[string]float64{"x": x, "y": 3}))
		}
	}
	r := Build(in)
	js := r.Variants[0].Judges
	if len(js) != 2 {
		t.Fatalf("judges = %+v, want x and y apart", js)
	}
	var x, y JudgeStats
	for _, j := range js {
		switch j.Grader {
		case "judge x":
			x = j
		case "judge y":
			y = j
		}
	}
	if x.Scored != 5 || x.Errored != 1 || x.Passed != 3 || x.Cases != 3 || x.Hash != "x-hash" {
		t.Errorf("judge x = %+v", x)
	}
	// Mean 16/5 = 3.2; clustered SE over the cases a (−3.4), b (+1.6),
	// c (+1.8): sqrt(3/2 · 17.36)/5, t(2) = 4.303.
	se := math.Sqrt(1.5*(3.4*3.4+1.6*1.6+1.8*1.8)) / 5
	if x.Mean == nil || math.Abs(*x.Mean-3.2) > 1e-9 || x.Interval == nil ||
		math.Abs(x.Interval.Low-max(3.2-4.303*se, 1)) > 1e-9 || math.Abs(x.Interval.High-min(3.2+4.303*se, 5)) > 1e-9 {
		t.Errorf("judge x mean %v interval %+v, want 3.2 ± 4.303×%.4f cut to 1–5", x.Mean, x.Interval, se)
	}
	if y.Mean == nil || *y.Mean != 3 || y.Interval == nil || y.Interval.Low != 3 || y.Interval.High != 3 {
		t.Errorf("judge y (always 3) = %+v", y)
	}
	if r.Variants[0].GradeErrors != 1 {
		t.Errorf("gradeErrors = %d, want 1", r.Variants[0].GradeErrors)
	}
	var b strings.Builder
	r.WriteText(&b)
	for _, want := range []string{"Judge scores", "judge x #x-hash", "3.20 [", "3/5", "1 trial could not be graded: a judge gave no verdict"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestJudgeStatsOneCase(t *testing.T) {
	in := Input{Run: transcript.Run{ID: "r", Variants: []string{"v"}, Trials: 2}, Cases: []string{"a"},
		Trials: []Trial{judged("a", "v", 1, map[string]float64{"x": 2}), judged("a", "v", 2, map[string]float64{"x": 4})}}
	j := Build(in).Variants[0].Judges[0]
	if j.Mean == nil || *j.Mean != 3 || j.Interval != nil {
		t.Errorf("one case: mean %v interval %v, want 3 and no interval", j.Mean, j.Interval)
	}
	if (Build(Input{Run: in.Run, Cases: in.Cases})).Variants[0].Judges != nil {
		t.Errorf("a report without judges has judges")
	}
}

// TestJudgeStatsExact: the same trials give the same judge mean and
// interval to the last bit, however often the report is built (the text
// report, its --json and the HTML page are built apart, and must agree).
func TestJudgeStatsExact(t *testing.T) {
	in := Input{Run: transcript.Run{ID: "r", Variants: []string{"v"}, Trials: 3}}
	// Scores whose sum depends on the order of addition in floating point.
	for c := range 40 {
		id := "case-" + strings.Repeat("x", c%3) + string(rune('a'+c%26)) + string(rune('0'+c/26))
		in.Cases = append(in.Cases, id)
		for i := range 3 {
			in.Trials = append(in.Trials, judged(id, "v", i+1, map[string]float64{"x": 1 + float64((c*7+i*3)%9)/2.3}))
		}
	}
	first := Build(in).Variants[0].Judges[0]
	for range 50 {
		got := Build(in).Variants[0].Judges[0]
		if *got.Mean != *first.Mean || got.Interval.Low != first.Interval.Low || got.Interval.High != first.Interval.High {
			t.Fatalf("a second build gave mean %v [%v, %v], the first %v [%v, %v]", *got.Mean, got.Interval.Low, got.Interval.High, *first.Mean, first.Interval.Low, first.Interval.High)
		}
	}
}
