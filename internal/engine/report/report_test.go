package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// tr makes a trial record. Graded follows the status as grade.Trial does.
func tr(c, v string, n int, status string, passed bool) Trial {
	graded := status == transcript.Answered || status == transcript.NoAnswer || status == transcript.TimedOut
	t := Trial{
		Key:          transcript.Key{Case: c, Variant: v, Trial: n},
		Status:       status,
		Graded:       graded,
		Passed:       graded && passed,
		InputTokens:  1000,
		OutputTokens: 100,
		DurationMs:   float64(1000 * n),
		ToolCalls:    n,
	}
	if status == transcript.Errored {
		t.Cause = transcript.CauseProvider
	}
	return t
}

// fixture is a partial run of 2 variants × 4 cases × 2 trials:
//
//	c1: terse 1/2, clear 2/2 (differ)
//	c2: terse 2/2, clear 2/2
//	c3: terse 0/1 + 1 errored, clear 1/2 (one timed out)
//	c4: terse 1/1 + 1 missing, clear 2/2 (incomplete)
//
// plus a trial of an unknown case and a repeated key, both ignored.
func fixture() Input {
	const a, s = transcript.Answered, transcript.TimedOut
	return Input{
		Run: transcript.Run{
			ID: "r1", Eval: "weather", Collect: transcript.CollectPartial,
			Variants: []string{"terse", "clear"}, Cases: 4, Trials: 2,
		},
		Variants: []VariantInfo{
			{Name: "terse", Client: "api", Model: "offline", Description: "short descriptions"},
			{Name: "clear", Client: "api", Model: "offline"},
		},
		Cases: []string{"c1", "c2", "c3", "c4"},
		Trials: []Trial{
			tr("c1", "terse", 1, a, true), tr("c1", "terse", 2, a, false),
			tr("c1", "clear", 1, a, true), tr("c1", "clear", 2, a, true),
			tr("c2", "terse", 1, a, true), tr("c2", "terse", 2, a, true),
			tr("c2", "clear", 1, a, true), tr("c2", "clear", 2, a, true),
			tr("c3", "terse", 1, transcript.Errored, false), tr("c3", "terse", 2, a, false),
			tr("c3", "clear", 1, a, true), tr("c3", "clear", 2, s, false),
			tr("c4", "terse", 1, a, true),
			tr("c4", "clear", 1, a, true), tr("c4", "clear", 2, a, true),
			tr("zz", "clear", 1, a, true),
			tr("c1", "clear", 1, a, false),
		},
	}
}

func TestBuildVariants(t *testing.T) {
	t.Parallel()
	r := Build(fixture())
	f := func(x float64) *float64 { return &x }
	want := []VariantStats{
		{
			Variant: "terse", Client: "api", Model: "offline", Description: "short descriptions",
			// c1 1/2, c2 2/2, c3 0/1: the trials of c1 and c3 disagree
			// little, so the design effect is only 1.04; but three cases
			// leave 2 degrees of freedom: 5/1.04 · (t_4/t_2)² trials.
			PassRate: f(3.0 / 5), Interval: &Interval{Low: 0.04957, High: 0.98969}, IntervalRule: IntervalClustered,
			Passed: 3, Graded: 5, Cases: 3, DesignEffect: f(1.04), EffectiveTrials: f(5 / 1.04 * 0.416395),
			Trials: 7, Planned: 8, Missing: 1,
			PassK:    []PassK{{K: 1, Cases: 3, PassAt: f(0.5), PassHat: f(0.5)}, {K: 2, Cases: 2, PassAt: f(1), PassHat: f(0.5)}},
			Outcomes: Outcomes{Answered: 6, Errored: 1},
			Errors:   Errors{Provider: 1},
			ErrorGroups: []ErrorGroup{
				{Status: transcript.Errored, Cause: transcript.CauseProvider, Count: 1, First: transcript.Key{Case: "c3", Variant: "terse", Trial: 1}},
			},
			Tokens:    Tokens{Input: 7000, Output: 700, MeanInput: f(1000), MeanOutput: f(100)},
			LatencyMs: Latency{Mean: f(9000.0 / 6), P50: f(1500), P95: f(2000)},
			ToolCalls: ToolCallStats{Total: 9, Mean: f(1.5)},
		},
		{
			Variant: "clear", Client: "api", Model: "offline",
			// c1 2/2, c2 2/2, c3 1/2: fewer passes within a case than
			// across cases would give an effect below 1, taken as 1;
			// 6 · (t_5/t_2)² trials.
			PassRate: f(5.0 / 6), Interval: &Interval{Low: 0.13798, High: 1}, IntervalRule: IntervalClustered,
			Passed: 5, Graded: 6, Cases: 3, DesignEffect: f(1), EffectiveTrials: f(6 * 0.356936),
			Trials: 8, Planned: 8, Missing: 0,
			PassK:       []PassK{{K: 1, Cases: 3, PassAt: f(5.0 / 6), PassHat: f(5.0 / 6)}, {K: 2, Cases: 3, PassAt: f(1), PassHat: f(2.0 / 3)}},
			Outcomes:    Outcomes{Answered: 7, TimedOut: 1},
			ErrorGroups: []ErrorGroup{},
			Tokens:      Tokens{Input: 8000, Output: 800, MeanInput: f(1000), MeanOutput: f(100)},
			LatencyMs:   Latency{Mean: f(1500), P50: f(1500), P95: f(2000)},
			ToolCalls:   ToolCallStats{Total: 12, Mean: f(1.5)},
		},
	}
	if diff := cmp.Diff(want, r.Variants, cmpopts.EquateApprox(0, 5e-5)); diff != "" {
		t.Errorf("Build(fixture).Variants (-want +got):\n%s", diff)
	}
	wantCounts := transcript.Counts{Planned: 16, Answered: 13, TimedOut: 1, Errored: 1, Missing: 1}
	if diff := cmp.Diff(wantCounts, r.Counts); diff != "" {
		t.Errorf("Build(fixture).Counts (-want +got):\n%s", diff)
	}
	if r.CompleteCases != 3 || r.IncompleteCases != 1 || r.Ignored != 2 {
		t.Errorf("Build(fixture) complete, incomplete, ignored = %d, %d, %d, want 3, 1, 2",
			r.CompleteCases, r.IncompleteCases, r.Ignored)
	}
}

func TestBuildCasesAndComparison(t *testing.T) {
	t.Parallel()
	r := Build(fixture())
	cell := func(v string, passed, graded, trials int) CaseCell {
		return CaseCell{Variant: v, Passed: passed, Graded: graded, Trials: trials, Planned: 2}
	}
	wantCases := []CaseRow{
		{Case: "c1", Complete: true, Differs: true, Variants: []CaseCell{cell("terse", 1, 2, 2), cell("clear", 2, 2, 2)}},
		{Case: "c2", Complete: true, Variants: []CaseCell{cell("terse", 2, 2, 2), cell("clear", 2, 2, 2)}},
		{Case: "c3", Complete: true, Differs: true, Variants: []CaseCell{cell("terse", 0, 1, 2), cell("clear", 1, 2, 2)}},
		{Case: "c4", Variants: []CaseCell{cell("terse", 1, 1, 1), cell("clear", 2, 2, 2)}},
	}
	if diff := cmp.Diff(wantCases, r.Cases); diff != "" {
		t.Errorf("Build(fixture).Cases (-want +got):\n%s", diff)
	}
	if len(r.Comparisons) != 1 {
		t.Fatalf("Build(fixture) has %d comparisons, want 1", len(r.Comparisons))
	}
	c := r.Comparisons[0]
	third := 1.0 / 3
	want := Comparison{
		A: "terse", B: "clear", Cases: 3, Resamples: 2000,
		MeanA: ptr(0.5), MeanB: ptr(2.5 / 3), MeanDifference: &third,
		BBetter: 2, Ties: 1, SignTestP: ptr(0.5),
		PerCase: []PairedCase{{"c1", 0.5, 1}, {"c2", 1, 1}, {"c3", 0, 0.5}},
	}
	if diff := cmp.Diff(want, c, cmpopts.EquateApprox(0, 1e-12), cmpopts.IgnoreFields(Comparison{}, "Interval")); diff != "" {
		t.Errorf("Build(fixture).Comparisons[0] (-want +got):\n%s", diff)
	}
	// Resampling three differences {0.5, 0, 0.5} gives means in [0, 0.5].
	if c.Interval == nil || c.Interval.Low < 0 || c.Interval.High > 0.5 || c.Interval.Low > third || c.Interval.High < third {
		t.Errorf("Build(fixture).Comparisons[0].Interval = %v, want an interval in [0, 0.5] around 1/3", c.Interval)
	}
	again := Build(fixture()).Comparisons[0].Interval
	if *again != *c.Interval {
		t.Errorf("Build(fixture) twice gives intervals %v and %v, want the same", c.Interval, again)
	}
}

func TestBuildEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    Input
		check func(t *testing.T, r Report)
	}{
		{
			name: "nothing ran",
			in:   Input{Run: transcript.Run{Trials: 3}, Variants: []VariantInfo{{Name: "a"}, {Name: "b"}}, Cases: []string{"c"}},
			check: func(t *testing.T, r Report) {
				v := r.Variants[0]
				if v.PassRate != nil || v.Interval != nil || v.LatencyMs.P50 != nil || v.Tokens.MeanInput != nil || v.Missing != 3 {
					t.Errorf("variant with no trials = %+v, want nulls and 3 missing", v)
				}
				c := r.Comparisons[0]
				if c.Cases != 0 || c.MeanDifference != nil || c.SignTestP != nil || c.Interval != nil {
					t.Errorf("comparison with no trials = %+v, want no cases and nulls", c)
				}
				if r.Counts.Missing != 6 || r.IncompleteCases != 1 {
					t.Errorf("counts = %+v, incomplete = %d, want 6 missing, 1 incomplete", r.Counts, r.IncompleteCases)
				}
			},
		},
		{
			name: "all errored is complete but not graded",
			in: Input{
				Run:      transcript.Run{Trials: 1},
				Variants: []VariantInfo{{Name: "a"}, {Name: "b"}},
				Cases:    []string{"c", "d"},
				Trials: []Trial{
					tr("c", "a", 1, transcript.Errored, false), tr("c", "b", 1, transcript.Answered, true),
					tr("d", "a", 1, transcript.Answered, false), tr("d", "b", 1, transcript.Cancelled, false),
				},
			},
			check: func(t *testing.T, r Report) {
				if r.CompleteCases != 2 {
					t.Errorf("complete cases = %d, want 2", r.CompleteCases)
				}
				if got := r.Variants[0]; got.Passed != 0 || got.Graded != 1 {
					t.Errorf("variant a passed/graded = %d/%d, want 0/1", got.Passed, got.Graded)
				}
				if got := r.Variants[1]; got.Passed != 1 || got.Graded != 1 || got.Outcomes.Cancelled != 1 {
					t.Errorf("variant b = %+v, want 1/1 with 1 cancelled", got)
				}
				if c := r.Comparisons[0]; c.Cases != 0 || c.Unpaired != 2 {
					t.Errorf("comparison = %+v, want 0 paired and 2 unpaired", c)
				}
				if r.Cases[0].Differs || r.Cases[1].Differs {
					t.Errorf("cases = %+v, want no difference where one side has no graded trial", r.Cases)
				}
			},
		},
		{
			name: "variants and cases from the run and the trials",
			in: Input{
				Run:    transcript.Run{Variants: []string{"a"}, Trials: 0},
				Trials: []Trial{tr("y", "a", 1, transcript.Answered, true), tr("x", "a", 1, transcript.NoAnswer, false)},
			},
			check: func(t *testing.T, r Report) {
				names := []string{}
				for _, c := range r.Cases {
					names = append(names, c.Case)
				}
				if !slices.Equal(names, []string{"y", "x"}) || len(r.Variants) != 1 || r.Variants[0].Variant != "a" {
					t.Errorf("cases %v, variants %+v, want [y x] and a", names, r.Variants)
				}
				if v := r.Variants[0]; v.Passed != 1 || v.Graded != 2 || r.Run.TrialsPerCase != 1 {
					t.Errorf("variant a = %d/%d, trials per case %d, want 1/2 and 1", v.Passed, v.Graded, r.Run.TrialsPerCase)
				}
				if len(r.Comparisons) != 0 {
					t.Errorf("comparisons = %+v, want none with one variant", r.Comparisons)
				}
			},
		},
		{
			name: "three variants give three pairs in display order",
			in:   Input{Run: transcript.Run{Trials: 1}, Variants: []VariantInfo{{Name: "a"}, {Name: "b"}, {Name: "c"}}, Cases: []string{"x"}},
			check: func(t *testing.T, r Report) {
				var pairs []string
				for _, c := range r.Comparisons {
					pairs = append(pairs, c.A+"-"+c.B)
				}
				if !slices.Equal(pairs, []string{"a-b", "a-c", "b-c"}) {
					t.Errorf("pairs = %v, want [a-b a-c b-c]", pairs)
				}
			},
		},
		{
			name: "trial index beyond the plan is ignored",
			in: Input{
				Run: transcript.Run{Trials: 1}, Variants: []VariantInfo{{Name: "a"}}, Cases: []string{"x"},
				Trials: []Trial{tr("x", "a", 1, transcript.Answered, true), tr("x", "a", 2, transcript.Answered, false), tr("x", "a", 0, transcript.Answered, false)},
			},
			check: func(t *testing.T, r Report) {
				if r.Ignored != 2 || r.Variants[0].Passed != 1 || r.Variants[0].Graded != 1 {
					t.Errorf("ignored %d, variant %+v, want 2 ignored and 1/1", r.Ignored, r.Variants[0])
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, Build(tt.in))
		})
	}
}

func TestNewTrial(t *testing.T) {
	t.Parallel()
	key := transcript.Key{Case: "c", Variant: "v", Trial: 3}
	tx := &transcript.Transcript{
		Key:       key,
		ToolCalls: make([]transcript.ToolCall, 4),
		Usage:     transcript.Usage{InputTokens: 10, OutputTokens: 2},
		Timing:    transcript.Timing{DurationMs: 1234.5},
		Outcome:   transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseServer},
	}
	// An errored trial is never graded: Passed set by mistake does not count.
	got := NewTrial(grade.TrialGrade{Key: key, Passed: true, Trial: transcript.Summarize(tx)})
	want := Trial{Key: key, Status: "errored", Cause: "server", InputTokens: 10, OutputTokens: 2, DurationMs: 1234.5, ToolCalls: 4}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewTrial (-want +got):\n%s", diff)
	}
}

// TestJSONKeys pins the JSON shape that scripts read.
func TestJSONKeys(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Build(fixture()))
	if err != nil {
		t.Fatalf("json.Marshal(Report) = %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(v any) []string {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v is not an object", v)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	first := func(v any) any { return v.([]any)[0] }
	tests := []struct {
		path string
		v    any
		want []string
	}{
		{"report", doc, []string{"cases", "comparisons", "completeCases", "counts", "ignored", "incompleteCases", "kind", "run", "variants", "version"}},
		{"run", doc["run"], []string{"collect", "eval", "id", "trialsPerCase"}},
		{"variants[0]", first(doc["variants"]), []string{
			"cases", "client", "description", "designEffect", "effectiveTrials", "errorGroups", "errors", "graded",
			"interval", "intervalRule", "latencyMs", "missing", "model", "outcomes",
			"passK", "passRate", "passed", "planned", "tokens", "toolCalls", "trials", "variant"}},
		{"variants[1]", doc["variants"].([]any)[1], []string{
			"cases", "client", "designEffect", "effectiveTrials", "errorGroups", "errors", "graded",
			"interval", "intervalRule", "latencyMs", "missing", "model", "outcomes",
			"passK", "passRate", "passed", "planned", "tokens", "toolCalls", "trials", "variant"}},
		{"variants[0].interval", first(doc["variants"]).(map[string]any)["interval"], []string{"high", "low"}},
		{"variants[0].passK[0]", first(first(doc["variants"]).(map[string]any)["passK"]), []string{"cases", "k", "passAt", "passHat"}},
		{"variants[0].errorGroups[0]", first(first(doc["variants"]).(map[string]any)["errorGroups"]), []string{"cause", "count", "first", "status"}},
		{"variants[0].outcomes", first(doc["variants"]).(map[string]any)["outcomes"], []string{"answered", "cancelled", "errored", "noAnswer", "skipped", "timedOut"}},
		{"variants[0].errors", first(doc["variants"]).(map[string]any)["errors"], []string{"client", "provider", "runner", "server"}},
		{"variants[0].tokens", first(doc["variants"]).(map[string]any)["tokens"], []string{"input", "meanInput", "meanOutput", "output"}},
		{"variants[0].latencyMs", first(doc["variants"]).(map[string]any)["latencyMs"], []string{"mean", "p50", "p95"}},
		{"variants[0].toolCalls", first(doc["variants"]).(map[string]any)["toolCalls"], []string{"mean", "total"}},
		{"cases[0]", first(doc["cases"]), []string{"case", "complete", "differs", "variants"}},
		{"cases[0].variants[0]", first(first(doc["cases"]).(map[string]any)["variants"]), []string{"graded", "passed", "planned", "trials", "variant"}},
		{"comparisons[0]", first(doc["comparisons"]), []string{
			"a", "aBetter", "b", "bBetter", "cases", "interval", "meanA", "meanB", "meanDifference",
			"perCase", "resamples", "signTestP", "ties", "unpaired"}},
		{"comparisons[0].perCase[0]", first(first(doc["comparisons"]).(map[string]any)["perCase"]), []string{"a", "b", "case"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, keys(tt.v)); diff != "" {
			t.Errorf("keys of %s (-want +got):\n%s", tt.path, diff)
		}
	}

	// Nothing graded gives null, not zero, so scripts can tell them apart.
	empty, err := json.Marshal(Build(Input{Run: transcript.Run{Trials: 1}, Variants: []VariantInfo{{Name: "a"}}, Cases: []string{"c"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"passRate":null`, `"interval":null`, `"designEffect":null`, `"comparisons":[]`, `"p50":null`,
		`"errorGroups":[]`, `"passK":[{"k":1,"cases":0,"passAt":null,"passHat":null}]`} {
		if !bytes.Contains(empty, []byte(want)) {
			t.Errorf("JSON of an empty report lacks %s:\n%s", want, empty)
		}
	}
}

func TestWriteText(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := Build(fixture()).WriteText(&buf); err != nil {
		t.Fatalf("WriteText = %v", err)
	}
	want := `Eval      weather
Run       r1 (partial)
Plan      2 variants × 4 cases × 2 trials = 16 trials
Outcomes  13 answered, 1 timed out, 1 errored, 1 missing

VARIANT  CLIENT  MODEL    PASS RATE [95% CI]  PASSED  ANSWERED  NO ANSWER  TIMED OUT  ERRORED  CANCELLED  MISSING  TOKENS IN/OUT  LATENCY P50/P95
terse    api     offline  60.0% [5.0–99.0]    3/5     6         0          0          1        0          1        1.0k/100       1.5s/2.0s
clear    api     offline  83.3% [13.8–100.0]  5/6     7         0          1          0        0          0        1.0k/100       1.5s/2.0s

Not graded:
  terse  1 errored (provider)  first c3 #1: no message

VARIANT  PASS@1  PASS@2      PASS^2
terse    50.0%   100.0% (2)  50.0% (2)
clear    83.3%   100.0%      66.7%
(pass@k: at least one of k trials of a case passes; pass^k: all k pass; averaged over cases; (n): only n cases have k graded trials)

  CASE  terse              clear
* c1    1/2                2/2
  c2    2/2                2/2
* c3    0/1 +1 not graded  1/2
? c4    1/1 +1 missing     2/2
(* the variants differ; ? trials missing, left out of pass rates; cells are passed/graded)

terse vs clear: clear passes more often on 2 of 3 cases (mean clear−terse +0.33, 95% CI +0.00 … +0.50), sign test p=0.500

Note: 1 trial missing; 1 case left out of pass rates; mst run --resume runs what is left
Note: 1 trial errored or cancelled: not counted as passes or failures
Note: 2 transcripts outside the plan or repeated, ignored

Method: only graded trials of complete cases count; 95% CI: Wilson with continuity correction on effective trials (graded ÷ CR1 design effect, clustered by case, for cases − 1 degrees of freedom).
Comparisons: paired by case; percentile bootstrap of the mean difference (2000 resamples, fixed seed); exact two-sided sign test.
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("WriteText (-want +got):\n%s", diff)
	}
}

func TestComparisonText(t *testing.T) {
	t.Parallel()
	c := func(b, a, ties, unpaired int, mean, low, high, p float64) Comparison {
		return Comparison{A: "terse", B: "clear", Cases: a + b + ties, Unpaired: unpaired, BBetter: b, ABetter: a, Ties: ties,
			MeanDifference: &mean, Interval: &Interval{Low: low, High: high}, SignTestP: &p}
	}
	tests := []struct {
		c    Comparison
		want string
	}{
		{c(6, 0, 4, 0, 0.6, 0.3, 0.9, 0.03125),
			"terse vs clear: clear passes more often on 6 of 10 cases (mean clear−terse +0.60, 95% CI +0.30 … +0.90), sign test p=0.031"},
		{c(0, 3, 1, 0, -0.75, -1, -0.25, 0.25),
			"terse vs clear: terse passes more often on 3 of 4 cases (mean clear−terse -0.75, 95% CI -1.00 … -0.25), sign test p=0.250"},
		{c(5, 2, 0, 1, 0.3, -0.1, 0.6, 0.453125),
			"terse vs clear: clear passes more often on 5 of 7 cases, terse on 2 (mean clear−terse +0.30, 95% CI -0.10 … +0.60), sign test p=0.453; 1 case left out, no graded trial under one of them"},
		{c(0, 0, 1, 0, 0, 0, 0, 1),
			"terse vs clear: same result on all 1 case (mean clear−terse +0.00, 95% CI +0.00 … +0.00), sign test p=1.000"},
		{c(300, 0, 0, 0, 1, 1, 1, 1e-90),
			"terse vs clear: clear passes more often on 300 of 300 cases (mean clear−terse +1.00, 95% CI +1.00 … +1.00), sign test p<0.001"},
		{Comparison{A: "terse", B: "clear"}, "terse vs clear: no complete case with graded trials under both"},
	}
	for _, tt := range tests {
		if got := comparisonText(tt.c); got != tt.want {
			t.Errorf("comparisonText(%d/%d/%d) =\n%s\nwant\n%s", tt.c.BBetter, tt.c.ABetter, tt.c.Ties, got, tt.want)
		}
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	f := func(x float64) *float64 { return &x }
	tests := []struct{ got, want string }{
		{tokens(nil), "–"},
		{tokens(f(950.4)), "950"},
		{tokens(f(1234)), "1.2k"},
		{tokens(f(999_949)), "999.9k"},
		{tokens(f(3_400_000)), "3.4M"},
		{millis(nil), "–"},
		{millis(f(850)), "850ms"},
		{millis(f(2149)), "2.1s"},
		{millis(f(185_000)), "3m05s"},
		{passRate(f(0.7), &Interval{0.481, 0.855}), "70.0% [48.1–85.5]"},
		{passRate(nil, nil), "–"},
		{signed(-0.0001), "+0.00"},
		{pValue(0.0004), "p<0.001"},
		{pValue(0.0312), "p=0.031"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("format %d = %q, want %q", i, tt.got, tt.want)
		}
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

func TestWriteTextError(t *testing.T) {
	t.Parallel()
	err := Build(fixture()).WriteText(failingWriter{})
	if err == nil || err.Error() != "writing report: disk full" {
		t.Errorf("WriteText(failing writer) = %v, want writing report: disk full", err)
	}
}
