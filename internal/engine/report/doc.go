// Package report turns the trials of one run into statistics and renders
// them for a terminal (WriteText) or as JSON (a Report marshals as it is).
//
// Build reads one small Trial record per transcript present, so callers can
// stream transcripts through grade.Trial and NewTrial without keeping them.
// The plan of a run is every case × variant × trial index 1..trials per
// case; a trial with no transcript is missing, and missing trials are never
// failures.
//
// The rules that make numbers comparable:
//
//   - A case is complete when every planned trial of it, under every variant,
//     has a transcript. Pass rates, the per-case matrix's differences and the
//     comparisons count complete cases only, so a partial run never compares
//     variants on different cases.
//   - Only graded trials count towards a pass rate: errored, cancelled and
//     skipped trials are infrastructure failures, reported apart by outcome
//     and cause, with the first message of each cause.
//   - A pass rate comes with a 95% Wilson score interval with continuity
//     correction computed on an effective number of trials: the graded
//     trials divided by a design effect, the cluster-robust (CR1) variance
//     of the pass rate with cases as clusters over its variance with
//     independent trials, allowing for the cases − 1 degrees of freedom it
//     is measured with (IntervalClustered). Trials of one case are alike,
//     so the interval is wider than if they were not; with one trial per
//     case it is the continuity-corrected Wilson interval on the trials.
//     When every trial passed, every one failed, or there is one case, how
//     alike they are cannot be measured, and each case counts as one trial
//     (IntervalCases); the reports mark such intervals with †.
//   - pass@k and pass^k, for k = 1 … trials per case, are the unbiased
//     per-case estimates averaged over the complete cases with at least k
//     graded trials.
//   - Two variants are compared case by case (paired): the mean difference
//     of per-case pass fractions, a 95% percentile bootstrap interval of it
//     (2000 resamples, fixed seed, so the same input always gives the same
//     interval), and an exact two-sided sign test over the cases where they
//     differ.
//
// docs/statistics.md gives every formula.
package report
