package report

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/mst-eval/mst/transcript"
)

// CompareKind and CompareVersion identify the JSON form of a
// RunComparison (mst compare --json).
const (
	CompareKind    = "mst.compare"
	CompareVersion = 1
)

// RunComparison compares a run with a base run of the same eval, variant
// by variant and case by case, and says where the servers' tools changed.
type RunComparison struct {
	Kind    string  `json:"kind"`
	Version int     `json:"version"`
	Base    RunInfo `json:"base"`
	Run     RunInfo `json:"run"`
	// Variants are the variants of both runs, in the run's order; those in
	// one run only are listed in OnlyInBase and OnlyInRun.
	Variants   []VariantChange `json:"variants"`
	OnlyInBase []string        `json:"onlyInBase"`
	OnlyInRun  []string        `json:"onlyInRun"`
	// Servers say, per server of either run, whether its tools changed.
	Servers []ServerChange `json:"servers"`
	// Notes say what makes the comparison weaker (another eval, cases in
	// one run only).
	Notes []string `json:"notes"`
}

// VariantChange is one variant in both runs: its pass rate in each and the
// paired comparison of its per-case pass fractions (A is the base run, B
// the run), over the cases complete in both runs with graded trials in
// both.
type VariantChange struct {
	Variant string    `json:"variant"`
	Base    RateStats `json:"base"`
	Run     RateStats `json:"run"`
	// Paired is the comparison; its A and B are "base" and "run".
	Paired Comparison `json:"paired"`
	// Changed are the paired cases whose pass fraction changed.
	Changed []PairedCase `json:"changed"`
	// Worse is true when the run passes less often than the base run and
	// the sign test says so at the 5% level (SignTestP < 0.05).
	Worse bool `json:"worse"`
}

// RateStats is a variant's pass rate in one run, as VariantStats has it.
type RateStats struct {
	PassRate *float64  `json:"passRate"`
	Interval *Interval `json:"interval"`
	// IntervalRule is VariantStats.IntervalRule: which rule made Interval.
	IntervalRule string `json:"intervalRule,omitempty"`
	Passed       int    `json:"passed"`
	Graded       int    `json:"graded"`
}

// ServerChange says whether one server's tools changed between the runs.
// A hash set is every distinct hash the run's transcripts recorded
// (sorted); an empty set means the transcripts recorded none (a run made
// before MST recorded it, or no trial reached the server).
type ServerChange struct {
	Server string `json:"server"`
	// ServerTools are the hashes of the server's own tool list, as MST's
	// proxy saw it (transcript servers[].serverToolsHash).
	BaseServerTools []string `json:"baseServerTools"`
	RunServerTools  []string `json:"runServerTools"`
	// ServerToolsChanged is true when both runs recorded hashes and the
	// sets differ.
	ServerToolsChanged bool `json:"serverToolsChanged"`
	// Offered compare, per variant, the tool list the client was offered
	// (servers[].toolsHash: after the variant's tool metadata).
	Offered []OfferedChange `json:"offered"`
}

// OfferedChange compares the offered tool list of one server under one
// variant.
type OfferedChange struct {
	Variant string   `json:"variant"`
	Base    []string `json:"base"`
	Run     []string `json:"run"`
	Changed bool     `json:"changed"`
}

// ToolHashes gathers the tool hashes the transcripts of one run recorded,
// per server and per variant and server. The zero value is ready to use.
type ToolHashes struct {
	server  map[string]map[string]bool
	offered map[[2]string]map[string]bool
}

// Add records the hashes of t's servers.
func (h *ToolHashes) Add(t *transcript.Transcript) {
	if h.server == nil {
		h.server = map[string]map[string]bool{}
		h.offered = map[[2]string]map[string]bool{}
	}
	for _, s := range t.Servers {
		if h.server[s.Name] == nil {
			h.server[s.Name] = map[string]bool{}
		}
		if s.ServerToolsHash != "" {
			h.server[s.Name][s.ServerToolsHash] = true
		}
		k := [2]string{t.Variant, s.Name}
		if h.offered[k] == nil {
			h.offered[k] = map[string]bool{}
		}
		if s.ToolsHash != "" {
			h.offered[k][s.ToolsHash] = true
		}
	}
}

// regressionAlpha is the level of the sign test under which a run that
// passes less often than its base is called worse.
const regressionAlpha = 0.05

// CompareRuns compares run with base. Cases are paired by id, variants by
// name; baseTools and runTools are the tool hashes of their transcripts.
func CompareRuns(base, run Report, baseTools, runTools ToolHashes) RunComparison {
	out := RunComparison{
		Kind: CompareKind, Version: CompareVersion, Base: base.Run, Run: run.Run,
		Variants: []VariantChange{}, OnlyInBase: []string{}, OnlyInRun: []string{},
		Servers: []ServerChange{}, Notes: []string{},
	}
	if base.Run.Eval != run.Run.Eval {
		out.Notes = append(out.Notes, "the runs are of different evals ("+text(base.Run.Eval)+" and "+text(run.Run.Eval)+"): cases are paired by id alone")
	}
	baseCases := map[string]CaseRow{}
	for _, c := range base.Cases {
		baseCases[c.Case] = c
	}
	runCases := map[string]bool{}
	var cases []string
	onlyRun, onlyBase := 0, 0
	for _, c := range run.Cases {
		runCases[c.Case] = true
		if _, ok := baseCases[c.Case]; ok {
			cases = append(cases, c.Case)
		} else {
			onlyRun++
		}
	}
	for _, c := range base.Cases {
		if !runCases[c.Case] {
			onlyBase++
		}
	}
	if onlyBase > 0 || onlyRun > 0 {
		out.Notes = append(out.Notes, plural(onlyBase, "case")+" only in the base run and "+plural(onlyRun, "case")+" only in the run, left out")
	}
	runRows := map[string]CaseRow{}
	for _, c := range run.Cases {
		runRows[c.Case] = c
	}
	baseVariants := map[string]VariantStats{}
	for _, v := range base.Variants {
		baseVariants[v.Variant] = v
	}
	inRun := map[string]bool{}
	for _, v := range run.Variants {
		inRun[v.Variant] = true
		bv, ok := baseVariants[v.Variant]
		if !ok {
			out.OnlyInRun = append(out.OnlyInRun, v.Variant)
			continue
		}
		p, changed := pairVariant(v.Variant, "base", "run", cases, baseCases, runRows)
		out.Variants = append(out.Variants, VariantChange{
			Variant: v.Variant, Base: rateStats(bv), Run: rateStats(v),
			Paired: p, Changed: changed, Worse: worse(p),
		})
	}
	for _, v := range base.Variants {
		if !inRun[v.Variant] {
			out.OnlyInBase = append(out.OnlyInBase, v.Variant)
		}
	}

	servers := slices.Sorted(maps.Keys(baseTools.server))
	for s := range runTools.server {
		if !slices.Contains(servers, s) {
			servers = append(servers, s)
		}
	}
	slices.Sort(servers)
	variants := map[string]bool{}
	for k := range baseTools.offered {
		variants[k[0]] = true
	}
	for k := range runTools.offered {
		variants[k[0]] = true
	}
	vnames := slices.Sorted(maps.Keys(variants))
	for _, s := range servers {
		sc := ServerChange{
			Server:          s,
			BaseServerTools: hashList(baseTools.server[s]),
			RunServerTools:  hashList(runTools.server[s]),
			Offered:         []OfferedChange{},
		}
		sc.ServerToolsChanged = changed(sc.BaseServerTools, sc.RunServerTools)
		for _, v := range vnames {
			b, okB := baseTools.offered[[2]string{v, s}]
			r, okR := runTools.offered[[2]string{v, s}]
			if !okB && !okR {
				continue
			}
			oc := OfferedChange{Variant: v, Base: hashList(b), Run: hashList(r)}
			oc.Changed = changed(oc.Base, oc.Run)
			sc.Offered = append(sc.Offered, oc)
		}
		out.Servers = append(out.Servers, sc)
	}
	return out
}

// pairVariant compares variant between two reports case by case: a and b
// name the sides, cases are the ids in both, aRows and bRows the reports'
// rows by id. A case counts when it is complete on both sides. It returns
// the comparison and the paired cases whose pass fraction changed.
func pairVariant(variant, a, b string, cases []string, aRows, bRows map[string]CaseRow) (Comparison, []PairedCase) {
	cells := make([][]cell, len(cases))
	complete := make([]bool, len(cases))
	for ci, id := range cases {
		ar, br := aRows[id], bRows[id]
		ac, bc := variantCell(ar, variant), variantCell(br, variant)
		cells[ci] = []cell{
			{present: ac.Trials, graded: ac.Graded, passed: ac.Passed},
			{present: bc.Trials, graded: bc.Graded, passed: bc.Passed},
		}
		complete[ci] = ar.Complete && br.Complete
	}
	p := compare(a, b, cases, cells, complete, 0, 1)
	changed := []PairedCase{}
	for _, pc := range p.PerCase {
		if pc.A != pc.B {
			changed = append(changed, pc)
		}
	}
	return p, changed
}

// worse says the second side of p passes less often than the first, and
// the sign test says so at the 5% level.
func worse(p Comparison) bool {
	return p.Cases > 0 && *p.MeanDifference < 0 && *p.SignTestP < regressionAlpha
}

// pairedCells are the paired comparison's cells in a table: the mean
// difference, its interval (between brackets when bracket is true, as the
// text tables show it), and the sign test followed by worseMark when
// worse; – for each when no case is paired.
func pairedCells(p Comparison, worse, bracket bool, worseMark string) (diff, iv, test string) {
	if p.Cases == 0 {
		return "–", "–", "–"
	}
	diff = signed(*p.MeanDifference)
	iv = signed(p.Interval.Low) + " … " + signed(p.Interval.High)
	if bracket {
		iv = "[" + iv + "]"
	}
	test = pValue(*p.SignTestP)
	if worse {
		test += " " + worseMark
	}
	return diff, iv, test
}

// rateStats is the pass rate of v.
func rateStats(v VariantStats) RateStats {
	return RateStats{PassRate: v.PassRate, Interval: v.Interval, IntervalRule: v.IntervalRule, Passed: v.Passed, Graded: v.Graded}
}

// rateCell is a pass rate with its interval, marked when the interval
// counts each case as one trial; marked records that a mark was given.
func rateCell(r RateStats, marked *bool) string {
	s := passRate(r.PassRate, r.Interval)
	if r.IntervalRule == IntervalCases {
		s += casesMark
		*marked = true
	}
	return s
}

// hashList is a hash set as a sorted list, empty rather than null.
func hashList(set map[string]bool) []string {
	out := slices.Sorted(maps.Keys(set))
	if out == nil {
		out = []string{}
	}
	return out
}

// changed says two recorded hash sets differ; a side with none recorded
// says nothing.
func changed(a, b []string) bool {
	return len(a) > 0 && len(b) > 0 && !slices.Equal(a, b)
}

// ToolsChanged says whether any server's own tools or any offered tool
// list changed.
func (c RunComparison) ToolsChanged() bool {
	for _, s := range c.Servers {
		if s.ServerToolsChanged {
			return true
		}
		for _, o := range s.Offered {
			if o.Changed {
				return true
			}
		}
	}
	return false
}

// sortChanged orders changed cases worst first (largest drop), then by id.
func sortChanged(cs []PairedCase) []PairedCase {
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(x, y PairedCase) int {
		return cmp.Compare(x.B-x.A, y.B-y.A)
	})
	return out
}

// WriteText writes the comparison for a terminal: the variants' pass
// rates in both runs with the paired difference, the cases that changed,
// and the servers whose tools changed.
func (c RunComparison) WriteText(w io.Writer) error { return c.WriteTextWidth(w, 0) }

// WriteTextWidth writes the comparison as WriteText does, within width
// characters a line (0: no limit).
func (c RunComparison) WriteTextWidth(w io.Writer, width int) error {
	ew := &errWriter{w: w}
	for _, l := range [][2]string{{"Base", runLine(c.Base)}, {"Run", runLine(c.Run)}} {
		room := 0
		if width > 0 {
			room = max(width-6, 1)
		}
		fmt.Fprintf(ew, "%-4s  %s\n", l[0], strings.ReplaceAll(Wrap(l[1], room, ""), "\n", "\n      "))
	}
	fmt.Fprintln(ew)
	if len(c.Variants) == 0 {
		fmt.Fprintln(ew, "No variant is in both runs.")
	} else {
		t := Table{Columns: []Column{{Head: "VARIANT", Shrink: true}, {Head: "BASE [95% CI]", Drop: 3}, {Head: "RUN [95% CI]", Drop: 4},
			{Head: "RUN−BASE"}, {Head: "95% CI", Drop: 5}, {Head: "SIGN TEST", Drop: 6}, {Head: "CASES", Drop: 1, Shrink: true}}}
		marked := false
		for _, v := range c.Variants {
			p := v.Paired
			diff, iv, test := pairedCells(p, v.Worse, true, "worse")
			t.Rows = append(t.Rows, []string{text(v.Variant),
				rateCell(v.Base, &marked), rateCell(v.Run, &marked),
				diff, iv, test, fmt.Sprintf("%d paired: %d better, %d worse", p.Cases, p.BBetter, p.ABetter)})
		}
		t.Write(ew, width)
		if marked {
			fmt.Fprintln(ew, Wrap("("+casesMark+" "+casesLegend+")", width, " "))
		}
		fmt.Fprintln(ew)
	}
	if len(c.OnlyInBase) > 0 {
		fmt.Fprintln(ew, Wrap("Only in the base run: "+textList(c.OnlyInBase), width, "  "))
	}
	if len(c.OnlyInRun) > 0 {
		fmt.Fprintln(ew, Wrap("Only in the run: "+textList(c.OnlyInRun), width, "  "))
	}
	some := false
	for _, v := range c.Variants {
		if len(v.Changed) > 0 {
			some = true
		}
	}
	if some {
		fmt.Fprintln(ew, Wrap("Cases that changed (pass fraction base → run):", width, "  "))
		t := Table{Columns: []Column{{Shrink: true}, {Shrink: true}, {}}, Indent: "  "}
		for _, v := range c.Variants {
			for _, pc := range sortChanged(v.Changed) {
				t.Rows = append(t.Rows, []string{text(v.Variant), text(pc.Case), fmt.Sprintf("%.2f → %.2f", pc.A, pc.B)})
			}
		}
		t.Write(ew, width)
		fmt.Fprintln(ew)
	}
	for _, l := range c.toolLines() {
		fmt.Fprintln(ew, Wrap(l, width, "  "))
	}
	fmt.Fprintln(ew)
	for _, n := range c.Notes {
		fmt.Fprintln(ew, Wrap("Note: "+n, width, "  "))
	}
	fmt.Fprintln(ew, Wrap(fmt.Sprintf("Method: cases paired by id over the cases complete in both runs; percentile bootstrap of the mean difference (%d resamples, fixed seed); exact two-sided sign test; worse: the run passes less often with p < %.2f.", bootstrapResamples, regressionAlpha), width, "  "))
	return ew.err
}

// toolLines say, one line per server, what changed in its tools.
func (c RunComparison) toolLines() []string {
	if len(c.Servers) == 0 {
		return []string{"Tools: no transcript names a server"}
	}
	var out []string
	for _, s := range c.Servers {
		name := "server " + text(s.Server)
		switch {
		case s.ServerToolsChanged:
			out = append(out, fmt.Sprintf("%s: the server's own tool list changed (%s → %s)", name, shortHashes(s.BaseServerTools), shortHashes(s.RunServerTools)))
		case len(s.BaseServerTools) == 0 || len(s.RunServerTools) == 0:
			out = append(out, name+": the server's own tool list was not recorded in both runs")
		default:
			out = append(out, name+": the server's own tool list is the same")
		}
		for _, o := range s.Offered {
			switch {
			case o.Changed:
				out = append(out, fmt.Sprintf("%s, variant %s: the tools offered changed (%s → %s)", name, text(o.Variant), shortHashes(o.Base), shortHashes(o.Run)))
			case len(o.Base) == 0:
				out = append(out, fmt.Sprintf("%s, variant %s: offered in the run only", name, text(o.Variant)))
			case len(o.Run) == 0:
				out = append(out, fmt.Sprintf("%s, variant %s: offered in the base run only", name, text(o.Variant)))
			}
		}
	}
	return out
}

// shortHashes shows a hash set by the first 12 hex digits of each.
func shortHashes(hs []string) string {
	if len(hs) == 0 {
		return "none"
	}
	short := make([]string, len(hs))
	for i, h := range hs {
		short[i] = text(h[:min(12, len(h))])
	}
	return strings.Join(short, ", ")
}

func textList(xs []string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = text(x)
	}
	return strings.Join(out, ", ")
}

func runLine(r RunInfo) string {
	s := text(junitOr(r.ID, "(no id)"))
	if r.Eval != "" {
		s += " (eval " + text(r.Eval) + ")"
	}
	if r.Collect != "" && r.Collect != transcript.CollectComplete {
		s += ", " + text(r.Collect)
	}
	return s
}
