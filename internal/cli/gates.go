package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Gates make mst run, mst report and mst compare exit non-zero when a
// result is not good enough, so that CI can stop on it:
//
//   - --min-pass-rate VARIANT=RATE or RATE (every variant): a variant
//     whose pass rate is under RATE, or that has no graded trial, fails
//     with ExitGate;
//   - --baseline RUN (mst run, mst report) or --fail-worse (mst compare):
//     a variant that passes significantly less often than in the base run
//     (report.VariantChange.Worse: paired sign test, p < 0.05) fails with
//     ExitGate;
//   - --max-errored: a variant with more errored or skipped trials than
//     allowed fails with ExitUnanswered, as mst run has always done.

// gateFlags are the gate flags as given.
type gateFlags struct {
	minPassRate []string
	baseline    string
	failWorse   bool
	maxErrored  string
}

// addPassRateFlag adds --min-pass-rate to fs.
func (g *gateFlags) addPassRateFlag(fs *pflag.FlagSet) {
	fs.StringArrayVar(&g.minPassRate, "min-pass-rate", nil, "exit 5 when a variant's pass rate is under this: VARIANT=0.8 for one variant, 0.8 (or 80%) for every variant (repeat)")
}

// addBaselineFlag adds --baseline to fs.
func (g *gateFlags) addBaselineFlag(fs *pflag.FlagSet) {
	fs.StringVar(&g.baseline, "baseline", "", "exit 5 when a variant passes significantly less often than in this stored run (its folder or id): paired by case, sign test p < 0.05")
}

// addMaxErroredFlag adds --max-errored, off by default, to fs.
func (g *gateFlags) addMaxErroredFlag(fs *pflag.FlagSet) {
	fs.StringVar(&g.maxErrored, "max-errored", "", "exit 4 when a variant has more errored or skipped trials than this: a share (10%, 0.1) or a count (3)")
}

// gates are parsed gate flags.
type gates struct {
	// global applies to every variant not in perVariant; nil: none.
	global     *float64
	globalText string
	perVariant map[string]float64
	// order keeps the variants of perVariant in the order given.
	order     []string
	maxErr    *errorLimit
	baseline  string
	failWorse bool
}

// parse checks the gate flags.
func (g gateFlags) parse() (gates, error) {
	out := gates{perVariant: map[string]float64{}, baseline: g.baseline, failWorse: g.failWorse}
	for _, s := range g.minPassRate {
		name, rate, named := strings.Cut(s, "=")
		if !named {
			rate, name = name, ""
		}
		v, err := parseRate(rate)
		if err != nil {
			return out, withCode(ExitUsage, fmt.Errorf("--min-pass-rate %q: %w: write VARIANT=0.8, VARIANT=80%%, or 0.8 for every variant", s, err))
		}
		if named {
			name = strings.TrimSpace(name)
			if name == "" {
				return out, withCode(ExitUsage, fmt.Errorf("--min-pass-rate %q: the variant name before = is empty", s))
			}
			if _, dup := out.perVariant[name]; !dup {
				out.order = append(out.order, name)
			}
			out.perVariant[name] = v
		} else {
			out.global, out.globalText = &v, rate
		}
	}
	if g.maxErrored != "" {
		l, err := parseErrorLimit(g.maxErrored)
		if err != nil {
			return out, withCode(ExitUsage, err)
		}
		out.maxErr = &l
	}
	return out, nil
}

// parseRate reads a pass rate: 0.8 or 80%.
func parseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	div := 1.0
	if p, ok := strings.CutSuffix(t, "%"); ok {
		t, div = p, 100
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v/div < 0 || v/div > 1 {
		return 0, fmt.Errorf("not a rate from 0 to 1 (or 0%% to 100%%)")
	}
	return v / div, nil
}

// any says whether a pass-rate or baseline gate was asked for.
func (g gates) any() bool {
	return g.global != nil || len(g.perVariant) > 0 || g.baseline != "" || g.failWorse
}

// checkVariants fails with ExitUsage when --min-pass-rate names a variant
// the report does not have.
func (g gates) checkVariants(rep report.Report) error {
	var names []string
	for _, v := range rep.Variants {
		names = append(names, v.Variant)
	}
	return g.checkNames(names)
}

// preflight checks the gates against a run's plan before any trial runs:
// --min-pass-rate names only variants the run has, and --baseline names a
// stored run that can be read.
func (g gates) preflight(ctx context.Context, reg *store.Registry, variants []string) error {
	if err := g.checkNames(variants); err != nil {
		return err
	}
	if g.baseline == "" {
		return nil
	}
	st, err := openRun(ctx, reg, g.baseline, "", nil)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("--baseline %w", err))
	}
	if _, err := st.ReadRun(ctx); err != nil {
		return withCode(ExitUsage, fmt.Errorf("--baseline %s: reading its run.json: %w", g.baseline, err))
	}
	return nil
}

// checkNames fails with ExitUsage when --min-pass-rate names a variant not
// among names.
func (g gates) checkNames(names []string) error {
	for _, n := range g.order {
		if !slices.Contains(names, n) {
			return withCode(ExitUsage, fmt.Errorf("--min-pass-rate %s=…: the run has no variant %q (its variants: %s)", transcript.Printable(n), n, transcript.Printable(strings.Join(names, ", "))))
		}
	}
	return nil
}

// passRateFailures lists, one sentence each, the variants under their
// --min-pass-rate bound.
func (g gates) passRateFailures(rep report.Report) []string {
	var out []string
	for _, v := range rep.Variants {
		bound, ok := g.perVariant[v.Variant]
		if !ok {
			if g.global == nil {
				continue
			}
			bound = *g.global
		}
		switch {
		case v.PassRate == nil:
			out = append(out, fmt.Sprintf("variant %s has no graded trial; --min-pass-rate asks for %s", transcript.Printable(v.Variant), pct(bound)))
		case *v.PassRate < bound-1e-12:
			out = append(out, fmt.Sprintf("variant %s passes %s (%d/%d), under --min-pass-rate %s", transcript.Printable(v.Variant), pct(*v.PassRate), v.Passed, v.Graded, pct(bound)))
		}
	}
	return out
}

// worseFailures lists, one sentence each, the variants that pass
// significantly less often than in the base run.
func worseFailures(c report.RunComparison) []string {
	var out []string
	for _, v := range c.Variants {
		if v.Worse {
			out = append(out, worseLine(v.Variant, "than in base run "+transcript.Printable(c.Base.ID), v.Paired))
		}
	}
	return out
}

// gateResult is what the gates found for one report.
type gateResult struct {
	// failed are the pass-rate and baseline gates that failed (ExitGate);
	// unanswered the --max-errored ones (ExitUnanswered).
	failed, unanswered []string
	comparison         *report.RunComparison
}

// evaluate runs the gates on rep, of the stored run st; with --baseline
// it loads the base run and compares.
func (g gates) evaluate(ctx context.Context, parts *builtin.Parts, rep report.Report, runTools func() (report.ToolHashes, error)) (gateResult, error) {
	var res gateResult
	if err := g.checkVariants(rep); err != nil {
		return res, err
	}
	res.failed = g.passRateFailures(rep)
	if g.baseline != "" {
		bst, base, err := loadRun(ctx, parts.ResultStores(), g.baseline, run.ReportOptions{Graders: parts.Graders()})
		if err != nil {
			return res, fmt.Errorf("--baseline %w", err)
		}
		bt, err := runToolHashes(ctx, bst)
		if err != nil {
			return res, fmt.Errorf("--baseline: %w", err)
		}
		rt, err := runTools()
		if err != nil {
			return res, err
		}
		c := report.CompareRuns(base, rep, bt, rt)
		res.comparison = &c
		res.failed = append(res.failed, worseFailures(c)...)
	}
	if g.maxErr != nil {
		res.unanswered = unanswered(rep, *g.maxErr)
	}
	return res, nil
}

// verdict is the Markdown verdict of res.
func (g gates) verdict(res gateResult) report.Verdict {
	return report.Verdict{Checked: g.any() || g.maxErr != nil, Failed: append(slices.Clone(res.unanswered), res.failed...)}
}

// exit turns res into the command's error: ExitUnanswered first, then
// ExitGate; nil when every gate passed.
func (res gateResult) exit() error {
	if len(res.unanswered) > 0 {
		return withCode(ExitUnanswered, fmt.Errorf("the run cannot answer:\n  %s", strings.Join(res.unanswered, "\n  ")))
	}
	if len(res.failed) > 0 {
		return withCode(ExitGate, fmt.Errorf("gate failed:\n  %s", strings.Join(res.failed, "\n  ")))
	}
	return nil
}

// pct shows a rate as a percentage: 80%, 66.7%.
func pct(x float64) string {
	s := strconv.FormatFloat(x*100, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}

// runGates checks mst run's gates on a finished, complete run; with
// --baseline and a text report it prints the comparison after it.
func runGates(ctx context.Context, stdio Stdio, stdout io.Writer, g gates, out *run.Outcome, asJSON bool) error {
	if !g.any() {
		return nil
	}
	res, err := g.evaluate(ctx, stdio.parts(), out.Report, func() (report.ToolHashes, error) { return runToolHashes(ctx, out.Store) })
	if err != nil {
		return err
	}
	if res.comparison != nil && !asJSON {
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "Against the baseline run:")
		if err := res.comparison.WriteTextWidth(stdout, termWidth(stdio, stdio.Out)); err != nil {
			return err
		}
	}
	return res.exit()
}
