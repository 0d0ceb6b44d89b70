package report

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/mst-eval/mst/grade"
)

// GradeSetInfo says which of a run's grade sets a report shows.
type GradeSetInfo struct {
	// ID is the set shown; Sets how many the run has.
	ID   string `json:"id"`
	Sets int    `json:"sets"`
	// By says what made it ("mst run", "mst grade"); Created when.
	By      string    `json:"by,omitempty"`
	Created time.Time `json:"created,omitzero"`
	// GradersFile is the file whose graders it was graded with, when not
	// the eval's.
	GradersFile string `json:"gradersFile,omitempty"`
}

// JudgeScore is one judge's score of one trial, as a report needs it.
type JudgeScore struct {
	Grader string `json:"grader"`
	Hash   string `json:"hash"`
	Model  string `json:"model,omitempty"`
	// Score and Passed are the judge's; Errored says the judge gave none.
	Score   float64     `json:"score"`
	Scale   grade.Scale `json:"scale"`
	Passed  bool        `json:"passed"`
	Errored bool        `json:"errored,omitempty"`
}

// judgeScores takes the judges' scores out of a grade's results.
func judgeScores(g grade.TrialGrade) []JudgeScore {
	var out []JudgeScore
	for _, r := range g.Results {
		if r.Judge != nil {
			out = append(out, JudgeScore{Grader: r.Grader, Hash: r.Judge.Hash, Model: r.Judge.Model, Score: r.Judge.Score, Scale: r.Judge.Scale, Passed: r.Passed, Errored: r.Error != ""})
		}
	}
	return out
}

// JudgeStats summarise one judge's scores of one variant's trials, over
// the complete cases. Judges are told apart by their hash: the same rubric
// sent to another model, or with another scale, is another judge.
type JudgeStats struct {
	Grader string      `json:"grader"`
	Hash   string      `json:"hash"`
	Model  string      `json:"model"`
	Scale  grade.Scale `json:"scale"`
	// Scored counts the trials the judge scored, Passed those it passed,
	// Errored those it could not score (its model failed or answered in
	// another shape); Cases the cases with a score.
	Scored  int `json:"scored"`
	Passed  int `json:"passed"`
	Errored int `json:"errored"`
	Cases   int `json:"cases"`
	// Mean is the mean score; Interval its 95% interval, a t interval on
	// a standard error clustered by case (trials of one case are alike),
	// cut to the scale; null with fewer than two cases.
	Mean     *float64  `json:"mean"`
	Interval *Interval `json:"interval"`
}

// judgeAcc gathers one judge's judgements of one variant, by case.
type judgeAcc struct {
	stats  JudgeStats
	byCase map[int][]judgement
}

// judgement is one judgement of one trial: 16 bytes.
type judgement struct {
	score           float64
	passed, errored bool
}

// addJudges keeps the judges' judgements of one trial of variant vi and
// case ci. Whether they count in the variant's stats is known only once
// every trial is in (only complete cases count): judgeStats decides.
func (b *Builder) addJudges(vi, ci int, scores []JudgeScore) {
	for _, s := range scores {
		var a *judgeAcc
		for _, x := range b.judges[vi] {
			if x.stats.Grader == s.Grader && x.stats.Hash == s.Hash {
				a = x
				break
			}
		}
		if a == nil {
			a = &judgeAcc{stats: JudgeStats{Grader: s.Grader, Hash: s.Hash, Model: s.Model, Scale: s.Scale}, byCase: map[int][]judgement{}}
			b.judges[vi] = append(b.judges[vi], a)
		}
		a.byCase[ci] = append(a.byCase[ci], judgement{score: s.Score, passed: s.Passed, errored: s.Errored})
	}
}

// judgeStats is one variant's judge stats over the complete cases, in the
// order the judges first appeared; nil when no judge judged the variant.
func judgeStats(accs []*judgeAcc, complete []bool) []JudgeStats {
	var out []JudgeStats
	for _, a := range accs {
		st := a.stats
		scores := map[int][]float64{}
		for ci, js := range a.byCase {
			if !complete[ci] {
				continue
			}
			for _, j := range js {
				if j.errored {
					st.Errored++
					continue
				}
				st.Scored++
				if j.passed {
					st.Passed++
				}
				scores[ci] = append(scores[ci], j.score)
			}
		}
		for _, xs := range scores {
			// One order for the sums, whatever order the trials came in.
			slices.Sort(xs)
		}
		st.Cases = len(scores)
		st.Mean, st.Interval = clusteredMean(scores, st.Scale)
		out = append(out, st)
	}
	return out
}

// clusteredMean is the mean of all scores and its 95% t interval with a
// cluster-robust (CR1) standard error over the cases:
//
//	SE² = G/(G−1) · Σ_cases (Σ_trials (x − mean))² / N²
//
// with G − 1 degrees of freedom, cut to the scale. With one trial per case
// it is the usual t interval of a mean. Nil interval below two cases.
func clusteredMean(byCase map[int][]float64, sc grade.Scale) (*float64, *Interval) {
	// The cases are summed in one order, so two builds of one report
	// (its text and its --json, the HTML page) agree to the last digit.
	cases := slices.Sorted(maps.Keys(byCase))
	var n int
	var sum float64
	for _, c := range cases {
		for _, x := range byCase[c] {
			sum += x
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	m := sum / float64(n)
	g := len(byCase)
	if g < 2 {
		return &m, nil
	}
	var s float64
	for _, c := range cases {
		var d float64
		for _, x := range byCase[c] {
			d += x - m
		}
		s += d * d
	}
	se := math.Sqrt(float64(g)/float64(g-1)*s) / float64(n)
	half := tQuantile975(g-1) * se
	lo, hi := float64(sc.Min), float64(sc.Max)
	return &m, &Interval{Low: min(max(m-half, lo), hi), High: max(min(m+half, hi), lo)}
}

// tQuantile975 is the 97.5% quantile of Student's t with df degrees of
// freedom (df ≥ 1), from a table to 30 and the normal quantile beyond.
func tQuantile975(df int) float64 {
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df >= 1 && df <= len(table) {
		return table[df-1]
	}
	return z95
}

// writeGrades says which grade set the report shows when the run has more
// than one, or that the run was not graded.
func (r Report) writeGrades(w io.Writer) {
	switch {
	case r.NotGraded:
		fmt.Fprintf(w, "Not graded: the run was collected with --no-grade; grade it with mst grade %s\n\n", text(r.Run.ID))
	case r.Grades != nil && (r.Grades.Sets > 1 || r.Grades.ID != "1"):
		by := r.Grades.By
		if !r.Grades.Created.IsZero() {
			by += ", " + r.Grades.Created.UTC().Format("2006-01-02 15:04 UTC")
		}
		if r.Grades.GradersFile != "" {
			by += ", graders from " + r.Grades.GradersFile
		}
		fmt.Fprintf(w, "Grades: set %s of %d (%s); another set: mst report %s --grades N\n\n", text(r.Grades.ID), r.Grades.Sets, text(by), text(r.Run.ID))
	}
}

// judgeRow is one row of the judge tables of the text and Markdown
// reports: one judge of one variant.
type judgeRow struct {
	j       JudgeStats
	variant string
	vi, ji  int // indexes of the variant in r.Variants, of j in its Judges
}

// judgeRows lists the judges of every variant, by judge name and then in
// report order, and counts the trials whose grading errored.
func (r Report) judgeRows() (rows []judgeRow, gradeErrors int) {
	for vi, v := range r.Variants {
		for ji, j := range v.Judges {
			rows = append(rows, judgeRow{j, v.Variant, vi, ji})
		}
		gradeErrors += v.GradeErrors
	}
	slices.SortStableFunc(rows, func(a, b judgeRow) int { return cmp.Compare(a.j.Grader, b.j.Grader) })
	return rows, gradeErrors
}

// judgeLabel names a judge in the tables: its grader name and the first
// 8 characters of its hash.
func judgeLabel(j JudgeStats) string {
	if j.Hash == "" {
		return j.Grader
	}
	return j.Grader + " #" + j.Hash[:min(8, len(j.Hash))]
}

// judgeMean is a judge's mean with its interval, "3.20 [2.10, 4.00]";
// none when it has no score.
func judgeMean(j JudgeStats, none string) string {
	if j.Mean == nil {
		return none
	}
	s := formatMean(*j.Mean)
	if j.Interval != nil {
		s += " [" + formatMean(j.Interval.Low) + ", " + formatMean(j.Interval.High) + "]"
	}
	return s
}

// JudgeRow is one row of a report's judge table: one judge of one
// variant, named as the text and Markdown reports name it.
type JudgeRow struct {
	// Variant is the variant's name; VariantIndex its index in
	// Report.Variants, and JudgeIndex the judge's in that variant's Judges.
	Variant                  string
	VariantIndex, JudgeIndex int
	// Label is the grader name and the first 8 characters of its hash.
	Label string
	Stats JudgeStats
}

// JudgeRows lists the rows of the judge table in the order of the text
// report (by judge name, then variants in report order), and counts the
// trials of complete cases that could not be graded (GradeErrors summed).
// The HTML report reads it, so that every format shows the same rows.
func (r Report) JudgeRows() (rows []JudgeRow, gradeErrors int) {
	in, errs := r.judgeRows()
	for _, x := range in {
		rows = append(rows, JudgeRow{Variant: x.variant, VariantIndex: x.vi, JudgeIndex: x.ji, Label: judgeLabel(x.j), Stats: x.j})
	}
	return rows, errs
}

// FormatScore writes a judge's mean score, or an end of its interval, as
// the reports show it: to 0.01.
func FormatScore(x float64) string { return formatMean(x) }

// writeJudges lists the judges' mean scores per variant, within width
// (0: no limit): the least needed columns go first, then long labels are
// cut short.
func (r Report) writeJudges(w io.Writer, width int) {
	rows, errs := r.judgeRows()
	if len(rows) == 0 && errs == 0 {
		return
	}
	if len(rows) > 0 {
		fmt.Fprintln(w, Wrap("Judge scores (mean with a 95% interval clustered by case, complete cases):", width, "  "))
		t := Table{Columns: []Column{{Head: "JUDGE", Shrink: true}, {Head: "VARIANT", Shrink: true}, {Head: "MEAN [95% CI]"},
			{Head: "SCALE", Drop: 1}, {Head: "JUDGED PASS", Drop: 3}, {Head: "ERRORED", Drop: 2}}}
		for _, x := range rows {
			j := x.j
			scale := strconv.Itoa(j.Scale.Min) + "–" + strconv.Itoa(j.Scale.Max)
			t.Rows = append(t.Rows, []string{text(judgeLabel(j)), text(x.variant), judgeMean(j, "-"), scale,
				fmt.Sprintf("%d/%d", j.Passed, j.Scored), strconv.Itoa(j.Errored)})
		}
		if n := t.Write(w, width); n > 0 {
			fmt.Fprintln(w, Wrap(fmt.Sprintf("(%s left out to fit %d columns; mst report --json has them all)", plural(n, "column"), width), width, " "))
		}
	}
	if errs > 0 {
		fmt.Fprintf(w, "%s could not be graded: a judge gave no verdict (they count neither as passed nor as failed; grade them again with mst grade).\n", plural(errs, "trial"))
	}
	fmt.Fprintln(w)
}

func formatMean(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
