package report

import (
	"cmp"
	"slices"

	"github.com/mst-eval/mst/transcript"
)

// cell accumulates one case under one variant.
type cell struct {
	present, graded, passed int
	gradeErrors             int // trials whose grade errored
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
	groups    map[groupKey]*groupAcc
}

// groupKey names one group of trials that were not graded.
type groupKey struct{ status, cause string }

// groupAcc accumulates one group: its size, its earliest trial and its
// earliest trial with a message.
type groupAcc struct {
	count          int
	first, withMsg *placed
}

// placed is a trial with its position in the plan.
type placed struct {
	caseIndex int
	key       transcript.Key
	detail    string
}

// before orders trials by case in dataset order, then trial index.
func (p placed) before(q *placed) bool {
	return q == nil || p.caseIndex < q.caseIndex || p.caseIndex == q.caseIndex && p.key.Trial < q.key.Trial
}

// add counts t in its group.
func (a *variantAcc) add(ci int, t Trial) {
	if a.groups == nil {
		a.groups = map[groupKey]*groupAcc{}
	}
	k := groupKey{t.Status, t.Cause}
	g := a.groups[k]
	if g == nil {
		g = &groupAcc{}
		a.groups[k] = g
	}
	g.count++
	p := placed{caseIndex: ci, key: t.Key, detail: t.Detail}
	if p.before(g.first) {
		g.first = &p
	}
	if p.detail != "" && p.before(g.withMsg) {
		g.withMsg = &p
	}
}

// errorGroups lists a's groups: errored by cause (client, server,
// provider, runner, then others by name), then skipped by cause likewise.
func (a variantAcc) errorGroups() []ErrorGroup {
	out := []ErrorGroup{}
	for k, g := range a.groups {
		p := g.first
		if g.withMsg != nil {
			p = g.withMsg
		}
		out = append(out, ErrorGroup{Status: k.status, Cause: k.cause, Count: g.count, First: p.key, Detail: p.detail})
	}
	rank := func(e ErrorGroup) (int, int) {
		st := 0
		if e.Status == transcript.Skipped {
			st = 1
		}
		c := slices.Index([]string{transcript.CauseClient, transcript.CauseServer, transcript.CauseProvider, transcript.CauseRunner}, e.Cause)
		if c < 0 {
			c = 4
		}
		return st, c
	}
	slices.SortFunc(out, func(x, y ErrorGroup) int {
		xs, xc := rank(x)
		ys, yc := rank(y)
		return cmp.Or(cmp.Compare(xs, ys), cmp.Compare(xc, yc), cmp.Compare(x.Cause, y.Cause))
	})
	return out
}

// Build computes the report of one run. It never fails: an empty or partial
// input gives a report with nulls where nothing could be measured.
func Build(in Input) Report {
	if in.Cases == nil {
		seen := map[string]bool{}
		for _, t := range in.Trials {
			if !seen[t.Case] {
				seen[t.Case] = true
				in.Cases = append(in.Cases, t.Case)
			}
		}
	}
	b := NewBuilder(in)
	for _, t := range in.Trials {
		b.Add(t)
	}
	return b.Report()
}

// Builder builds the report of one run from its trials, given one at a
// time in any order: the report is the same whatever the order. What it
// keeps grows with the plan (cases × variants, and one bit per planned
// trial), by 8 bytes per trial that ended with a duration and 8 per judge
// score, never by a record per trial, so that a run of 100,000 trials is
// reported in about the memory of one of 10,000. A Builder is not safe for
// concurrent use.
type Builder struct {
	in       Input
	variants []VariantInfo
	cases    []string
	k        int
	vIndex   map[string]int
	cIndex   map[string]int
	cells    [][]cell
	accs     []variantAcc
	judges   [][]*judgeAcc // by variant, in the order the judges first appear
	seen     planBits
	counts   transcript.Counts
	ignored  int
}

// NewBuilder starts the report of in's run. in.Trials are not read (add
// them with Add); in.Cases must list the cases (Build finds them in the
// trials when they are not given).
func NewBuilder(in Input) *Builder {
	in.Trials = nil
	b := &Builder{in: in, variants: slices.Clone(in.Variants), cases: in.Cases, k: max(in.Run.Trials, 1)}
	if len(b.variants) == 0 {
		for _, name := range in.Run.Variants {
			b.variants = append(b.variants, VariantInfo{Name: name})
		}
	}
	b.vIndex = make(map[string]int, len(b.variants))
	for i, v := range b.variants {
		b.vIndex[v.Name] = i
	}
	b.cIndex = make(map[string]int, len(b.cases))
	for i, c := range b.cases {
		b.cIndex[c] = i
	}
	b.cells = make([][]cell, len(b.cases))
	for i := range b.cells {
		b.cells[i] = make([]cell, len(b.variants))
	}
	b.accs = make([]variantAcc, len(b.variants))
	b.judges = make([][]*judgeAcc, len(b.variants))
	// seen marks the planned trials met, one bit each: a trial's place in
	// the plan stands for its key, so no map of keys is built.
	b.seen = newPlanBits(len(b.cases), len(b.variants), b.k)
	return b
}

// Add counts one trial. A trial outside the plan (an unknown case or
// variant, a trial index out of range) or met before is not counted, and
// the report says how many were ignored.
func (b *Builder) Add(t Trial) {
	vi, okV := b.vIndex[t.Variant]
	ci, okC := b.cIndex[t.Case]
	if !okV || !okC || t.Trial < 1 || t.Trial > b.k || !b.seen.mark(ci, vi, t.Trial) {
		b.ignored++
		return
	}
	b.counts.Add(t.Status)

	c := &b.cells[ci][vi]
	c.present++
	if t.Graded {
		c.graded++
		if t.Passed {
			c.passed++
		}
	}
	if t.GradeError != "" {
		c.gradeErrors++
	}

	a := &b.accs[vi]
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
	case transcript.Skipped:
		a.outcomes.Skipped++
	default:
		a.outcomes.Other++
	}
	switch t.Status {
	case transcript.Errored, transcript.Skipped:
		a.add(ci, t)
	}
	switch t.Status {
	case transcript.Answered, transcript.NoAnswer, transcript.TimedOut:
		a.durations = append(a.durations, t.DurationMs)
		a.toolCalls += t.ToolCalls
	}
	b.addJudges(vi, ci, t.Judges) // judges.go
}

// Describe sets the client and model shown for variant name, when they
// are known only from its trials.
func (b *Builder) Describe(name, client, model string) {
	if i, ok := b.vIndex[name]; ok {
		b.variants[i].Client, b.variants[i].Model = client, model
	}
}

// SetRun replaces the run record the report shows (its state, note, end
// and shards), once the run has ended. Its variants and trials per case
// must be those the Builder was made with.
func (b *Builder) SetRun(rec transcript.Run) { b.in.Run = rec }

// SetGradeSet says which grade set the report shows.
func (b *Builder) SetGradeSet(g *GradeSetInfo) { b.in.GradeSet = g }

// Report computes the report of the trials added so far.
func (b *Builder) Report() Report {
	variants, cases, cells, k := b.variants, b.cases, b.cells, b.k
	in := b.in
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
			ShardTrials:   shardTrials(in.Run.Runner),
		},
		Counts:  b.counts,
		Ignored: b.ignored,
	}
	r.Counts.Planned = len(cases) * len(variants) * k
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
		r.Variants[vi] = variantStats(v, b.accs[vi], cells, complete, vi, len(cases)*k, k)
		for ci := range cases {
			if complete[ci] {
				r.Variants[vi].GradeErrors += cells[ci][vi].gradeErrors
			}
		}
		r.Variants[vi].Judges = judgeStats(b.judges[vi], complete) // judges.go
	}
	r.Grades, r.NotGraded = in.GradeSet, in.NotGraded

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
// k is the trials per case.
func variantStats(v VariantInfo, a variantAcc, cells [][]cell, complete []bool, vi, planned, k int) VariantStats {
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
		ErrorGroups: a.errorGroups(),
		Tokens:      Tokens{Input: a.input, Output: a.output},
		ToolCalls:   ToolCallStats{Total: a.toolCalls},
	}
	// The cases that count: complete, with at least one graded trial.
	var counted []cell
	for ci, row := range cells {
		if complete[ci] && row[vi].graded > 0 {
			counted = append(counted, row[vi])
		}
	}
	for _, c := range counted {
		s.Passed += c.passed
		s.Graded += c.graded
	}
	s.Cases = len(counted)
	if s.Graded > 0 {
		s.PassRate = ptr(float64(s.Passed) / float64(s.Graded))
		cw := clusterWilson(counted)
		s.Interval = &cw.interval
		s.IntervalRule = cw.rule
		s.DesignEffect = cw.designEffect
		s.EffectiveTrials = ptr(cw.effective)
	}
	s.PassK = make([]PassK, k)
	for j := range k {
		pk := PassK{K: j + 1}
		var at, hat float64
		for _, c := range counted {
			if c.graded >= pk.K {
				pk.Cases++
				at += passAtK(c.graded, c.passed, pk.K)
				hat += passHatK(c.graded, c.passed, pk.K)
			}
		}
		if pk.Cases > 0 {
			pk.PassAt = ptr(at / float64(pk.Cases))
			pk.PassHat = ptr(hat / float64(pk.Cases))
		}
		s.PassK[j] = pk
	}
	if a.trials > 0 {
		s.Tokens.MeanInput = ptr(float64(a.input) / float64(a.trials))
		s.Tokens.MeanOutput = ptr(float64(a.output) / float64(a.trials))
	}
	if n := len(a.durations); n > 0 {
		// Sorted first (a copy: the accumulator's own list stays as the
		// trials came), so the mean is summed in one order whatever the
		// order the trials were added in.
		sorted := slices.Clone(a.durations)
		slices.Sort(sorted)
		s.LatencyMs.Mean = ptr(mean(sorted))
		s.LatencyMs.P50 = ptr(percentile(sorted, 0.50))
		s.LatencyMs.P95 = ptr(percentile(sorted, 0.95))
		s.ToolCalls.Mean = ptr(float64(a.toolCalls) / float64(n))
	}
	return s
}

// planBits holds one bit for every trial of a plan of cases × variants ×
// k trials, by place: case, variant, trial index from 1.
type planBits struct {
	bits        []uint64
	variants, k int
}

func newPlanBits(cases, variants, k int) planBits {
	return planBits{bits: make([]uint64, (cases*variants*k+63)/64), variants: variants, k: k}
}

// mark sets the bit of the trial and says whether it was clear.
func (p planBits) mark(ci, vi, trial int) bool {
	i := (ci*p.variants+vi)*p.k + trial - 1
	w, b := i/64, uint64(1)<<(i%64)
	if p.bits[w]&b != 0 {
		return false
	}
	p.bits[w] |= b
	return true
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

// shardTrials is how many trials each shard of a run was given: what
// run.json records, or, for a run recorded before it did, what its first
// attempt's machines say (a shard given no trial had no machine). Nil for
// a run of one shard.
func shardTrials(ri transcript.RunnerInfo) []int {
	if ri.Shards <= 1 {
		return nil
	}
	if len(ri.ShardTrials) == ri.Shards {
		return ri.ShardTrials
	}
	out := make([]int, ri.Shards)
	seen := false
	for _, m := range ri.Machines {
		if m.Attempt <= 1 && m.Shard >= 0 && m.Shard < ri.Shards {
			out[m.Shard] += m.Trials
			seen = true
		}
	}
	if !seen {
		return nil
	}
	return out
}
