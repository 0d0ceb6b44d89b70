package report

import (
	"github.com/mst-eval/mst/transcript"
)

// cell accumulates one case under one variant.
type cell struct {
	present, graded, passed int
}

// variantAcc accumulates one variant over all its transcripts.
type variantAcc struct {
	trials    int
	outcomes  Outcomes
	errors    Errors
	input     int64
	output    int64
	durations []float64
	toolCalls int
}

// Build computes the report of one run. It never fails: an empty or partial
// input gives a report with nulls where nothing could be measured.
func Build(in Input) Report {
	variants := in.Variants
	if len(variants) == 0 {
		for _, name := range in.Run.Variants {
			variants = append(variants, VariantInfo{Name: name})
		}
	}
	cases := in.Cases
	if cases == nil {
		seen := map[string]bool{}
		for _, t := range in.Trials {
			if !seen[t.Case] {
				seen[t.Case] = true
				cases = append(cases, t.Case)
			}
		}
	}
	k := max(in.Run.Trials, 1)

	vIndex := make(map[string]int, len(variants))
	for i, v := range variants {
		vIndex[v.Name] = i
	}
	cIndex := make(map[string]int, len(cases))
	for i, c := range cases {
		cIndex[c] = i
	}
	cells := make([][]cell, len(cases))
	for i := range cells {
		cells[i] = make([]cell, len(variants))
	}
	accs := make([]variantAcc, len(variants))

	r := Report{
		Kind:    Kind,
		Version: Version,
		Run: RunInfo{
			ID:            in.Run.ID,
			Eval:          in.Run.Eval,
			Collect:       in.Run.Collect,
			Note:          in.Run.Note,
			Started:       in.Run.Started,
			Ended:         in.Run.Ended,
			TrialsPerCase: k,
		},
	}
	r.Counts.Planned = len(cases) * len(variants) * k

	seen := make(map[transcript.Key]bool, len(in.Trials))
	for _, t := range in.Trials {
		vi, okV := vIndex[t.Variant]
		ci, okC := cIndex[t.Case]
		if !okV || !okC || t.Trial < 1 || t.Trial > k || seen[t.Key] {
			r.Ignored++
			continue
		}
		seen[t.Key] = true
		r.Counts.Add(t.Status)

		c := &cells[ci][vi]
		c.present++
		if t.Graded {
			c.graded++
			if t.Passed {
				c.passed++
			}
		}

		a := &accs[vi]
		a.trials++
		a.input += t.InputTokens
		a.output += t.OutputTokens
		switch t.Status {
		case transcript.Answered:
			a.outcomes.Answered++
		case transcript.NoAnswer:
			a.outcomes.NoAnswer++
		case transcript.TimedOut:
			a.outcomes.TimedOut++
		case transcript.Errored:
			a.outcomes.Errored++
			switch t.Cause {
			case transcript.CauseClient:
				a.errors.Client++
			case transcript.CauseServer:
				a.errors.Server++
			case transcript.CauseProvider:
				a.errors.Provider++
			case transcript.CauseRunner:
				a.errors.Runner++
			default:
				a.errors.Other++
			}
		case transcript.Cancelled:
			a.outcomes.Cancelled++
		default:
			a.outcomes.Other++
		}
		switch t.Status {
		case transcript.Answered, transcript.NoAnswer, transcript.TimedOut:
			a.durations = append(a.durations, t.DurationMs)
			a.toolCalls += t.ToolCalls
		}
	}
	r.Counts.Missing = r.Counts.Planned - r.Counts.Done()

	complete := make([]bool, len(cases))
	for ci := range cases {
		complete[ci] = len(variants) > 0
		for vi := range variants {
			if cells[ci][vi].present < k {
				complete[ci] = false
			}
		}
		if complete[ci] {
			r.CompleteCases++
		} else {
			r.IncompleteCases++
		}
	}

	r.Variants = make([]VariantStats, len(variants))
	for vi, v := range variants {
		r.Variants[vi] = variantStats(v, accs[vi], cells, complete, vi, len(cases)*k)
	}

	r.Cases = make([]CaseRow, len(cases))
	for ci, id := range cases {
		row := CaseRow{Case: id, Complete: complete[ci], Variants: make([]CaseCell, len(variants))}
		for vi, v := range variants {
			c := cells[ci][vi]
			row.Variants[vi] = CaseCell{Variant: v.Name, Passed: c.passed, Graded: c.graded, Trials: c.present, Planned: k}
		}
		row.Differs = complete[ci] && differs(cells[ci])
		r.Cases[ci] = row
	}

	r.Comparisons = []Comparison{}
	for ai := range variants {
		for bi := ai + 1; bi < len(variants); bi++ {
			r.Comparisons = append(r.Comparisons, compare(variants[ai].Name, variants[bi].Name, cases, cells, complete, ai, bi))
		}
	}
	return r
}

// variantStats computes the numbers of variant vi.
func variantStats(v VariantInfo, a variantAcc, cells [][]cell, complete []bool, vi, planned int) VariantStats {
	s := VariantStats{
		Variant:     v.Name,
		Client:      v.Client,
		Model:       v.Model,
		Description: v.Description,
		Trials:      a.trials,
		Planned:     planned,
		Missing:     planned - a.trials,
		Outcomes:    a.outcomes,
		Errors:      a.errors,
		Tokens:      Tokens{Input: a.input, Output: a.output},
		ToolCalls:   ToolCallStats{Total: a.toolCalls},
	}
	var withGraded, anyPassed, allPassed int
	for ci, row := range cells {
		if !complete[ci] {
			continue
		}
		c := row[vi]
		s.Passed += c.passed
		s.Graded += c.graded
		if c.graded > 0 {
			withGraded++
			if c.passed > 0 {
				anyPassed++
			}
			if c.passed == c.graded {
				allPassed++
			}
		}
	}
	if s.Graded > 0 {
		s.PassRate = ptr(float64(s.Passed) / float64(s.Graded))
		iv := wilson(s.Passed, s.Graded)
		s.Interval = &iv
	}
	if withGraded > 0 {
		s.PassAtK = ptr(float64(anyPassed) / float64(withGraded))
		s.PassHatK = ptr(float64(allPassed) / float64(withGraded))
	}
	if a.trials > 0 {
		s.Tokens.MeanInput = ptr(float64(a.input) / float64(a.trials))
		s.Tokens.MeanOutput = ptr(float64(a.output) / float64(a.trials))
	}
	if n := len(a.durations); n > 0 {
		s.LatencyMs.Mean = ptr(mean(a.durations))
		sorted := sortedCopy(a.durations)
		s.LatencyMs.P50 = ptr(percentile(sorted, 0.50))
		s.LatencyMs.P95 = ptr(percentile(sorted, 0.95))
		s.ToolCalls.Mean = ptr(float64(a.toolCalls) / float64(n))
	}
	return s
}

// differs reports whether the variants with a graded trial do not all have
// the same pass fraction. Fractions are compared exactly by cross
// multiplication.
func differs(row []cell) bool {
	first := -1
	for i, c := range row {
		if c.graded == 0 {
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		f := row[first]
		if c.passed*f.graded != f.passed*c.graded {
			return true
		}
	}
	return false
}

// compare pairs variants ai (A) and bi (B) over complete cases.
func compare(a, b string, cases []string, cells [][]cell, complete []bool, ai, bi int) Comparison {
	out := Comparison{A: a, B: b, Resamples: bootstrapResamples, PerCase: []PairedCase{}}
	var diffs, fa, fb []float64
	for ci, id := range cases {
		if !complete[ci] {
			continue
		}
		ca, cb := cells[ci][ai], cells[ci][bi]
		if ca.graded == 0 || cb.graded == 0 {
			out.Unpaired++
			continue
		}
		pa := float64(ca.passed) / float64(ca.graded)
		pb := float64(cb.passed) / float64(cb.graded)
		out.PerCase = append(out.PerCase, PairedCase{Case: id, A: pa, B: pb})
		fa = append(fa, pa)
		fb = append(fb, pb)
		diffs = append(diffs, pb-pa)
		// Compare the fractions exactly, not their float differences.
		switch x, y := cb.passed*ca.graded, ca.passed*cb.graded; {
		case x > y:
			out.BBetter++
		case x < y:
			out.ABetter++
		default:
			out.Ties++
		}
	}
	out.Cases = len(diffs)
	if out.Cases == 0 {
		return out
	}
	out.MeanA = ptr(mean(fa))
	out.MeanB = ptr(mean(fb))
	out.MeanDifference = ptr(mean(diffs))
	iv := bootstrap(diffs)
	out.Interval = &iv
	out.SignTestP = ptr(signTest(out.BBetter, out.ABetter))
	return out
}

func ptr(f float64) *float64 { return &f }
