package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// GradesCompareKind and GradesCompareVersion identify the JSON form of a
// GradeSetComparison (mst compare RUN --base-grades N --json).
const (
	GradesCompareKind    = "mst.compare-grades"
	GradesCompareVersion = 1
)

// The verdicts a trial can have in one grade set, as TrialChange names
// them.
const (
	VerdictPass     = "pass"     // graded, and it passed
	VerdictFail     = "fail"     // graded, and it failed
	VerdictErrored  = "errored"  // a judge that decides the trial gave no verdict
	VerdictUngraded = "ungraded" // its outcome is never graded (errored, cancelled, skipped)
	VerdictMissing  = "missing"  // the set holds no grade of it (a set left partial)
)

// GradeSetComparison compares two grade sets of one run: the same
// transcripts graded twice (another judge, a changed rubric, a graders
// file), so every difference is the graders'. Base is the set compared
// against, Grades the other; in each variant "base" and "grades" name
// them the same way.
type GradeSetComparison struct {
	Kind    string       `json:"kind"`
	Version int          `json:"version"`
	Run     RunInfo      `json:"run"`
	Base    GradeSetInfo `json:"base"`
	Grades  GradeSetInfo `json:"grades"`
	// Variants are the run's variants, in report order.
	Variants []GradeSetChange `json:"variants"`
	// Notes say what weakens the comparison (a set that lacks grades).
	Notes []string `json:"notes"`
}

// GradeSetChange is one variant under both grade sets: its pass rate in
// each, their paired comparison case by case (A is the base set, B the
// other) over the complete cases, the trials whose verdict changed, and
// each set's judges.
type GradeSetChange struct {
	Variant string    `json:"variant"`
	Base    RateStats `json:"base"`
	Grades  RateStats `json:"grades"`
	// Paired compares the per-case pass fractions; its A and B are
	// "set N" and "set M".
	Paired Comparison `json:"paired"`
	// ChangedCases are the paired cases whose pass fraction changed.
	ChangedCases []PairedCase `json:"changedCases"`
	// Trials counts the trials compared (those with a transcript);
	// PassToFail and FailToPass count those that went from one verdict to
	// the other.
	Trials     int `json:"trials"`
	PassToFail int `json:"passToFail"`
	FailToPass int `json:"failToPass"`
	// Changed are the trials whose verdict differs between the sets, by
	// case and trial.
	Changed []TrialChange `json:"changed"`
	// BaseJudges and Judges are each set's judges of the variant, as the
	// report of that set gives them (a judge of both sets has one hash).
	BaseJudges []JudgeStats `json:"baseJudges"`
	Judges     []JudgeStats `json:"judges"`
	// Worse is true when the variant passes less often under Grades and
	// the sign test says so at the 5% level (SignTestP < 0.05).
	Worse bool `json:"worse"`
}

// TrialChange is one trial whose verdict differs between the two sets.
type TrialChange struct {
	Case  string `json:"case"`
	Trial int    `json:"trial"`
	// Base and Grades are its verdicts: pass, fail, errored, ungraded or
	// missing.
	Base   string `json:"base"`
	Grades string `json:"grades"`
	// BaseFailing and Failing name the graders that failed or gave no
	// verdict in each set (with why the trial failed, when its outcome
	// alone failed it).
	BaseFailing []string `json:"baseFailing"`
	Failing     []string `json:"failing"`
}

// CompareGradeSets compares two reports of one run, each built from one of
// its grade sets, and the latest grade of every trial in each set (as
// store.Grades gives them). Variants and cases are the run's own, so both
// reports have the same.
func CompareGradeSets(base, other Report, baseGrades, otherGrades []grade.TrialGrade) GradeSetComparison {
	out := GradeSetComparison{
		Kind: GradesCompareKind, Version: GradesCompareVersion, Run: other.Run,
		Variants: []GradeSetChange{}, Notes: []string{},
	}
	if base.Grades != nil {
		out.Base = *base.Grades
	}
	if other.Grades != nil {
		out.Grades = *other.Grades
	}
	aName, bName := "set "+junitOr(out.Base.ID, "?"), "set "+junitOr(out.Grades.ID, "?")
	baseRows, otherRows := map[string]CaseRow{}, map[string]CaseRow{}
	for _, c := range base.Cases {
		baseRows[c.Case] = c
	}
	var cases []string
	for _, c := range other.Cases {
		otherRows[c.Case] = c
		if _, ok := baseRows[c.Case]; ok {
			cases = append(cases, c.Case)
		}
	}
	inCases := map[string]bool{}
	for _, id := range cases {
		inCases[id] = true
	}
	k := max(other.Run.TrialsPerCase, 1)
	latest := func(gs []grade.TrialGrade) map[transcript.Key]grade.TrialGrade {
		m := make(map[transcript.Key]grade.TrialGrade, len(gs))
		for _, g := range gs {
			if inCases[g.Case] && g.Key.Trial >= 1 && g.Key.Trial <= k && !g.Superseded {
				m[g.Key] = g
			}
		}
		return m
	}
	bg, og := latest(baseGrades), latest(otherGrades)
	baseVariants := map[string]VariantStats{}
	for _, v := range base.Variants {
		baseVariants[v.Variant] = v
	}
	missing := [2]int{}
	for _, v := range other.Variants {
		bv := baseVariants[v.Variant]
		p, changedCases := pairVariant(v.Variant, aName, bName, cases, baseRows, otherRows)
		vc := GradeSetChange{
			Variant: v.Variant, Base: rateStats(bv), Grades: rateStats(v),
			Paired: p, ChangedCases: changedCases, Changed: []TrialChange{},
			BaseJudges: nonNil(bv.Judges), Judges: nonNil(v.Judges), Worse: worse(p),
		}
		for _, id := range cases {
			for i := 1; i <= k; i++ {
				key := transcript.Key{Case: id, Variant: v.Variant, Trial: i}
				a, okA := bg[key]
				b, okB := og[key]
				if !okA && !okB {
					continue // no transcript: missing from the run, not from a set
				}
				vc.Trials++
				if !okA {
					missing[0]++
				}
				if !okB {
					missing[1]++
				}
				va, vb := verdict(a, okA), verdict(b, okB)
				switch {
				case va == vb:
					continue
				case va == VerdictPass && vb == VerdictFail:
					vc.PassToFail++
				case va == VerdictFail && vb == VerdictPass:
					vc.FailToPass++
				}
				vc.Changed = append(vc.Changed, TrialChange{
					Case: id, Trial: i, Base: va, Grades: vb,
					BaseFailing: failing(a), Failing: failing(b),
				})
			}
		}
		out.Variants = append(out.Variants, vc)
	}
	for i, n := range missing {
		if n > 0 {
			name := []string{aName, bName}[i]
			out.Notes = append(out.Notes, fmt.Sprintf("%s has no grade of %s that the other grades (an interrupted mst grade: finish it with mst grade %s --resume %s)",
				name, plural(n, "trial"), text(junitOr(out.Run.ID, "RUN")), text(strings.TrimPrefix(name, "set "))))
		}
	}
	return out
}

// verdict is a trial's verdict in one set; ok says the set has its grade.
func verdict(g grade.TrialGrade, ok bool) string {
	switch {
	case !ok:
		return VerdictMissing
	case g.Graded && g.Passed:
		return VerdictPass
	case g.Graded:
		return VerdictFail
	case g.Errored != "":
		return VerdictErrored
	default:
		return VerdictUngraded
	}
}

// failing names the graders of g that failed or gave no verdict, and why
// the trial failed when its outcome alone failed it; empty, not null.
func failing(g grade.TrialGrade) []string {
	out := []string{}
	for _, r := range g.Results {
		if !r.Passed && !r.Advisory {
			out = append(out, r.Grader)
		}
	}
	if len(out) == 0 && g.Failed != "" {
		out = append(out, g.Failed)
	}
	return out
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// setLabel names a grade set in the comparison's headings: "set 2 (mst
// grade, 2026-12-01 09:00 UTC, graders from strict.yaml)".
func setLabel(s GradeSetInfo) string {
	by := []string{}
	if s.By != "" {
		by = append(by, s.By)
	}
	if !s.Created.IsZero() {
		by = append(by, s.Created.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if s.GradersFile != "" {
		by = append(by, "graders from "+s.GradersFile)
	}
	out := "set " + junitOr(s.ID, "?")
	if len(by) > 0 {
		out += " (" + strings.Join(by, ", ") + ")"
	}
	return text(out)
}

// WriteText writes the comparison for a terminal: the sets, each
// variant's pass rate under both with the paired difference, the trials
// whose verdict changed, and each set's judges.
func (c GradeSetComparison) WriteText(w io.Writer) error { return c.WriteTextWidth(w, 0) }

// WriteTextWidth writes the comparison as WriteText does, within width
// characters a line (0: no limit).
func (c GradeSetComparison) WriteTextWidth(w io.Writer, width int) error {
	ew := &errWriter{w: w}
	a, b := "SET "+text(c.Base.ID), "SET "+text(c.Grades.ID)
	fmt.Fprintln(ew, Wrap("Run    "+runLine(c.Run), width, "       "))
	fmt.Fprintln(ew, Wrap("Base   "+setLabel(c.Base), width, "       "))
	fmt.Fprintln(ew, Wrap("Grades "+setLabel(c.Grades), width, "       "))
	fmt.Fprintln(ew)
	if len(c.Variants) == 0 {
		fmt.Fprintln(ew, "The run has no variant.")
	} else {
		t := Table{Columns: []Column{{Head: "VARIANT", Shrink: true}, {Head: a + " [95% CI]", Drop: 3}, {Head: b + " [95% CI]", Drop: 4},
			{Head: strings.TrimPrefix(b, "SET ") + "−" + strings.TrimPrefix(a, "SET ")}, {Head: "95% CI", Drop: 5}, {Head: "SIGN TEST", Drop: 6},
			{Head: "TRIALS", Drop: 1, Shrink: true}}}
		marked := false
		for _, v := range c.Variants {
			diff, iv, test := pairedCells(v.Paired, v.Worse, true, "worse")
			t.Rows = append(t.Rows, []string{text(v.Variant),
				rateCell(v.Base, &marked), rateCell(v.Grades, &marked),
				diff, iv, test, fmt.Sprintf("%d: %d pass→fail, %d fail→pass, %d changed", v.Trials, v.PassToFail, v.FailToPass, len(v.Changed))})
		}
		t.Write(ew, width)
		if marked {
			fmt.Fprintln(ew, Wrap("("+casesMark+" "+casesLegend+")", width, " "))
		}
		fmt.Fprintln(ew)
	}
	changed := 0
	for _, v := range c.Variants {
		changed += len(v.Changed)
	}
	if changed == 0 {
		fmt.Fprintln(ew, "No trial's verdict changed.")
	} else {
		fmt.Fprintln(ew, "Trials whose verdict changed:")
		t := Table{Columns: []Column{{Head: "VARIANT", Shrink: true}, {Head: "CASE", Shrink: true}, {Head: "TRIAL"}, {Head: a + " → " + strings.TrimPrefix(b, "SET ")},
			{Head: "FAILING IN " + a, Shrink: true, Drop: 2}, {Head: "FAILING IN " + b, Shrink: true, Drop: 1}}, Indent: "  "}
		for _, v := range c.Variants {
			for _, tc := range sortTrialChanges(v.Changed) {
				t.Rows = append(t.Rows, []string{text(v.Variant), text(tc.Case), fmt.Sprint(tc.Trial),
					tc.Base + " → " + tc.Grades, graderList(tc.BaseFailing), graderList(tc.Failing)})
			}
		}
		t.Write(ew, width)
	}
	fmt.Fprintln(ew)
	if rows := c.judgeRows(); len(rows) > 0 {
		fmt.Fprintln(ew, "Judge scores in each set (mean with a 95% interval clustered by case, complete cases):")
		t := Table{Columns: []Column{{Head: "SET"}, {Head: "JUDGE", Shrink: true}, {Head: "VARIANT", Shrink: true}, {Head: "MEAN [95% CI]"}, {Head: "JUDGED PASS", Drop: 1}, {Head: "ERRORED", Drop: 2}}}
		for _, r := range rows {
			t.Rows = append(t.Rows, []string{text(r.set), text(judgeLabel(r.j)), text(r.variant), judgeMean(r.j, "–"), fmt.Sprintf("%d/%d", r.j.Passed, r.j.Scored), fmt.Sprint(r.j.Errored)})
		}
		t.Write(ew, width)
	}
	for _, l := range c.noJudgeLines() {
		fmt.Fprintln(ew, l)
	}
	if len(c.judgeRows()) > 0 {
		fmt.Fprintln(ew)
	}
	for _, n := range c.Notes {
		fmt.Fprintln(ew, Wrap("Note: "+n, width, "  "))
	}
	fmt.Fprintln(ew, Wrap(fmt.Sprintf("Method: the same transcripts under two grade sets; cases paired by id over the complete cases; percentile bootstrap of the mean difference of per-case pass fractions (%d resamples, fixed seed); exact two-sided sign test; worse: %s passes less often with p < %.2f.", bootstrapResamples, strings.ToLower(b), regressionAlpha), width, "  "))
	return ew.err
}

// gradeJudgeRow is one judge of one variant in one set.
type gradeJudgeRow struct {
	set, variant string
	j            JudgeStats
}

// judgeRows lists each set's judges, by judge name, then set (base
// first), then variant in report order.
func (c GradeSetComparison) judgeRows() []gradeJudgeRow {
	var rows []gradeJudgeRow
	for i, set := range []GradeSetInfo{c.Base, c.Grades} {
		for _, v := range c.Variants {
			js := v.BaseJudges
			if i == 1 {
				js = v.Judges
			}
			for _, j := range js {
				rows = append(rows, gradeJudgeRow{set.ID, v.Variant, j})
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b gradeJudgeRow) int { return cmp.Compare(a.j.Grader, b.j.Grader) })
	return rows
}

// sortTrialChanges orders changes pass→fail first, then fail→pass, then
// the rest, each by case and trial.
func sortTrialChanges(cs []TrialChange) []TrialChange {
	rank := func(tc TrialChange) int {
		switch {
		case tc.Base == VerdictPass && tc.Grades == VerdictFail:
			return 0
		case tc.Base == VerdictFail && tc.Grades == VerdictPass:
			return 1
		}
		return 2
	}
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(x, y TrialChange) int { return cmp.Compare(rank(x), rank(y)) })
	return out
}

// graderList shows the graders that failed in one set; – for none.
func graderList(xs []string) string {
	if len(xs) == 0 {
		return "–"
	}
	return textList(xs)
}

// noJudgeLines say which set has no judge when the other has one, so a
// judge table with one set's rows is not read as the judge agreeing.
func (c GradeSetComparison) noJudgeLines() []string {
	has := [2]bool{}
	for _, v := range c.Variants {
		has[0] = has[0] || len(v.BaseJudges) > 0
		has[1] = has[1] || len(v.Judges) > 0
	}
	if has[0] == has[1] {
		return nil
	}
	id := c.Grades.ID // the set without one
	if !has[0] {
		id = c.Base.ID
	}
	return []string{"Set " + text(id) + " has no judge."}
}

// WriteMarkdown writes the comparison as Markdown for a pull-request
// comment, under the verdict of the gates asked for.
func (c GradeSetComparison) WriteMarkdown(w io.Writer, v Verdict) error {
	ew := &errWriter{w: w}
	a, b := "Set "+c.Base.ID, "Set "+c.Grades.ID
	fmt.Fprintf(ew, "### MST grade sets compared: %s\n\n", md(junitOr(c.Run.Eval, "(unnamed eval)")))
	fmt.Fprintf(ew, "%s\n\n", v.line())
	fmt.Fprintf(ew, "Run %s: base %s, grades %s.\n\n", md(junitOr(c.Run.ID, "(no id)")), md(setLabel(c.Base)), md(setLabel(c.Grades)))
	if len(c.Variants) > 0 {
		fmt.Fprintf(ew, "| Variant | %s | %s | %s − %s | 95%% CI | Sign test | Pass → fail | Fail → pass |\n", md(a), md(b), md(strings.ToLower(b)), md(strings.ToLower(a)))
		fmt.Fprintln(ew, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, vc := range c.Variants {
			diff, iv, test := pairedCells(vc.Paired, vc.Worse, false, "**worse**")
			fmt.Fprintf(ew, "| %s | %s | %s | %s | %s | %s | %d | %d |\n", md(vc.Variant),
				mdRate(vc.Base.PassRate), mdRate(vc.Grades.PassRate), diff, iv, test, vc.PassToFail, vc.FailToPass)
		}
		fmt.Fprintln(ew)
	}
	rows := 0
	for _, vc := range c.Variants {
		for _, tc := range sortTrialChanges(vc.Changed) {
			if rows == 0 {
				fmt.Fprintln(ew, "**Trials whose verdict changed:**")
				fmt.Fprintln(ew)
				fmt.Fprintf(ew, "| Variant | Case | Trial | %s | %s | Failing in %s | Failing in %s |\n", md(a), md(b), md(strings.ToLower(a)), md(strings.ToLower(b)))
				fmt.Fprintln(ew, "|---|---|---:|---|---|---|---|")
			}
			rows++
			if rows <= markdownCaseRows {
				fmt.Fprintf(ew, "| %s | %s | %d | %s | %s | %s | %s |\n", md(vc.Variant), md(tc.Case), tc.Trial, tc.Base, tc.Grades, md(graderList(tc.BaseFailing)), md(graderList(tc.Failing)))
			}
		}
	}
	if rows > markdownCaseRows {
		fmt.Fprintf(ew, "\n…and %d more (`mst compare RUN --base-grades N` lists them all).\n", rows-markdownCaseRows)
	}
	if rows > 0 {
		fmt.Fprintln(ew)
	}
	if jr := c.judgeRows(); len(jr) > 0 {
		fmt.Fprintln(ew, "| Set | Judge | Variant | Mean [95% CI] | Judged pass | Errored |")
		fmt.Fprintln(ew, "|---|---|---|---:|---:|---:|")
		for _, r := range jr {
			fmt.Fprintf(ew, "| %s | %s | %s | %s | %d/%d | %d |\n", md(r.set), md(judgeLabel(r.j)), md(r.variant), judgeMean(r.j, "–"), r.j.Passed, r.j.Scored, r.j.Errored)
		}
		fmt.Fprintln(ew)
	}
	for _, l := range c.noJudgeLines() {
		fmt.Fprintf(ew, "- %s\n", md(l))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(ew, "- Note: %s\n", md(n))
	}
	fmt.Fprintln(ew)
	return ew.err
}
