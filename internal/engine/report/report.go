package report

import (
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// Kind and Version identify the JSON form of a Report. Version 2 replaced
// each variant's passAtK and passHatK numbers with the passK list, and
// added cases, designEffect, effectiveTrials, errorGroups and
// outcomes.skipped.
const (
	Kind    = "mst.report"
	Version = 2
)

// Trial is what a report needs from one transcript and its grade.
type Trial struct {
	transcript.Key
	// Status is the outcome status; Cause is set when it is errored.
	Status string `json:"status"`
	Cause  string `json:"cause,omitempty"`
	// Detail is the first line of the outcome's detail (grade.Summary).
	Detail string `json:"detail,omitempty"`
	// Graded and Passed come from grade.TrialGrade.
	Graded       bool    `json:"graded"`
	Passed       bool    `json:"passed"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	DurationMs   float64 `json:"durationMs"`
	ToolCalls    int     `json:"toolCalls"`
	// Judges are the judges' scores of the trial (judges.go); GradeError
	// is grade.TrialGrade.Errored.
	Judges     []JudgeScore `json:"judges,omitempty"`
	GradeError string       `json:"gradeError,omitempty"`
}

// NewTrial makes the report record of one graded trial: the one way a
// report record is made, from a grade alone.
func NewTrial(g grade.TrialGrade) Trial {
	return Trial{
		Key:          g.Key,
		Status:       g.Trial.Status,
		Cause:        g.Trial.Cause,
		Detail:       g.Trial.Detail,
		Graded:       g.Graded,
		Passed:       g.Graded && g.Passed,
		InputTokens:  g.Trial.InputTokens,
		OutputTokens: g.Trial.OutputTokens,
		DurationMs:   g.Trial.DurationMs,
		ToolCalls:    g.Trial.ToolCalls,
		Judges:       judgeScores(g),
		GradeError:   g.Errored,
	}
}

// VariantInfo describes a variant for display.
type VariantInfo struct {
	Name        string
	Client      string
	Model       string
	Description string
}

// Input is everything Build reads.
type Input struct {
	Run transcript.Run
	// Variants are in display order. When empty, the names in Run.Variants
	// are used without client or model.
	Variants []VariantInfo
	// Cases are the case ids in dataset order. When nil, the cases are those
	// of Trials in the order they first appear (the plan is then only as
	// complete as the trials).
	Cases []string
	// Trials hold one record per transcript present. Records outside the
	// plan (an unknown case or variant, a trial index out of range) and
	// repeated keys after the first are ignored and counted.
	Trials []Trial
	// GradeSet says which of the run's grade sets the trials' grades come
	// from (nil: not said); NotGraded that the run was collected without
	// grading.
	GradeSet  *GradeSetInfo
	NotGraded bool
}

// Report holds the statistics of one run. It marshals to the JSON that
// --json prints.
type Report struct {
	Kind    string  `json:"kind"`
	Version int     `json:"version"`
	Run     RunInfo `json:"run"`
	// Counts count the planned trials by outcome, recomputed from the trials.
	Counts transcript.Counts `json:"counts"`
	// CompleteCases have a transcript for every planned trial under every
	// variant; only they count in pass rates and comparisons.
	CompleteCases   int `json:"completeCases"`
	IncompleteCases int `json:"incompleteCases"`
	// Ignored counts trial records outside the plan or repeated.
	Ignored int `json:"ignored,omitempty"`
	// Grades is the grade set shown (judges.go); NotGraded is true for a
	// run collected with --no-grade and not graded since.
	Grades      *GradeSetInfo  `json:"grades,omitempty"`
	NotGraded   bool           `json:"notGraded,omitempty"`
	Variants    []VariantStats `json:"variants"`
	Cases       []CaseRow      `json:"cases"`
	Comparisons []Comparison   `json:"comparisons"`
}

// RunInfo is the part of run.json a report shows.
type RunInfo struct {
	ID            string    `json:"id"`
	Eval          string    `json:"eval"`
	Collect       string    `json:"collect"`
	Note          string    `json:"note,omitempty"`
	Started       time.Time `json:"started,omitzero"`
	Ended         time.Time `json:"ended,omitzero"`
	TrialsPerCase int       `json:"trialsPerCase"`
	// ShardTrials is, for a run of more than one shard, how many planned
	// trials each shard was given, by shard index (transcript.RunnerInfo).
	ShardTrials []int `json:"shardTrials,omitempty"`
}

// VariantStats are the numbers of one variant.
type VariantStats struct {
	Variant     string `json:"variant"`
	Client      string `json:"client"`
	Model       string `json:"model"`
	Description string `json:"description,omitempty"`
	// PassRate is Passed/Graded, null when nothing was graded.
	PassRate *float64 `json:"passRate"`
	// Interval is the 95% Wilson score interval with continuity
	// correction of PassRate computed on EffectiveTrials instead of
	// Graded, so that it allows for the trials of one case being alike;
	// null with PassRate. IntervalRule says how EffectiveTrials was found:
	// IntervalClustered or IntervalCases; it is absent with Interval.
	Interval     *Interval `json:"interval"`
	IntervalRule string    `json:"intervalRule,omitempty"`
	// Passed and Graded count graded trials of complete cases; Cases counts
	// the complete cases with at least one graded trial.
	Passed int `json:"passed"`
	Graded int `json:"graded"`
	Cases  int `json:"cases"`
	// DesignEffect is the cluster-robust (CR1) variance of PassRate over
	// cases divided by its variance were every trial independent, at least
	// 1; it is null under IntervalCases, where it cannot be measured, and
	// with PassRate. EffectiveTrials is Graded/DesignEffect times the
	// degrees-of-freedom factor (t_{Graded−1}/t_{Cases−1})² under
	// IntervalClustered, and Cases under IntervalCases; null with PassRate.
	// docs/statistics.md gives the rule.
	DesignEffect    *float64 `json:"designEffect"`
	EffectiveTrials *float64 `json:"effectiveTrials"`
	// Trials counts transcripts present, of all cases; Planned and Missing
	// count the plan.
	Trials  int `json:"trials"`
	Planned int `json:"planned"`
	Missing int `json:"missing"`
	// PassK holds pass@k and pass^k for k = 1 … trials per case.
	PassK    []PassK  `json:"passK"`
	Outcomes Outcomes `json:"outcomes"`
	Errors   Errors   `json:"errors"`
	// ErrorGroups group the errored and the skipped trials of the variant
	// (of every case, complete or not) by outcome and cause, errored ones
	// first by cause (client, server, provider, runner, other), then the
	// skipped ones. It is empty, not null, when there are none.
	ErrorGroups []ErrorGroup `json:"errorGroups"`
	// Tokens count every transcript present; the means are per transcript.
	Tokens Tokens `json:"tokens"`
	// LatencyMs and ToolCalls cover trials that ran to an end (answered,
	// no answer, timed out): an errored or cancelled trial's time says
	// little about the variant.
	LatencyMs Latency       `json:"latencyMs"`
	ToolCalls ToolCallStats `json:"toolCalls"`
	// Judges summarise each judge's scores (judges.go), absent without
	// judges; GradeErrors counts the trials of complete cases whose
	// grading errored (a judge gave no verdict).
	Judges      []JudgeStats `json:"judges,omitempty"`
	GradeErrors int          `json:"gradeErrors,omitempty"`
}

// PassK is pass@k and pass^k of one variant for one k, estimated without
// bias per case from its n graded trials of which c passed, then averaged
// over Cases: the complete cases with at least k graded trials.
type PassK struct {
	K     int `json:"k"`
	Cases int `json:"cases"`
	// PassAt is pass@k, the chance that at least one of k trials drawn
	// without replacement from a case's graded trials passes:
	// 1 − C(n−c, k)/C(n, k). Null when Cases is 0.
	PassAt *float64 `json:"passAt"`
	// PassHat is pass^k, the chance that all k such trials pass:
	// C(c, k)/C(n, k). Null when Cases is 0.
	PassHat *float64 `json:"passHat"`
}

// ErrorGroup is the errored trials of one cause, or the skipped trials of
// one cause, of one variant.
type ErrorGroup struct {
	// Status is errored or skipped; Cause is the outcome's cause (empty
	// when the transcripts name none).
	Status string `json:"status"`
	Cause  string `json:"cause,omitempty"`
	Count  int    `json:"count"`
	// First is the first trial of the group with a message (cases in
	// dataset order, then by trial index), or the first trial when none
	// has one; Detail is its message, as stored (redacted).
	First  transcript.Key `json:"first"`
	Detail string         `json:"detail,omitempty"`
}

// Interval is a closed interval [Low, High].
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Outcomes count transcripts by status.
type Outcomes struct {
	Answered  int `json:"answered"`
	NoAnswer  int `json:"noAnswer"`
	TimedOut  int `json:"timedOut"`
	Errored   int `json:"errored"`
	Cancelled int `json:"cancelled"`
	Skipped   int `json:"skipped"`
	// Other counts statuses this MST does not know.
	Other int `json:"other,omitempty"`
}

// Errors count errored transcripts by cause.
type Errors struct {
	Client   int `json:"client"`
	Server   int `json:"server"`
	Provider int `json:"provider"`
	Runner   int `json:"runner"`
	// Other counts errored transcripts with no or an unknown cause.
	Other int `json:"other,omitempty"`
}

// Tokens sum and average token usage.
type Tokens struct {
	Input      int64    `json:"input"`
	Output     int64    `json:"output"`
	MeanInput  *float64 `json:"meanInput"`
	MeanOutput *float64 `json:"meanOutput"`
}

// Latency summarises trial durations in milliseconds; percentiles
// interpolate linearly between ranks. All are null when no trial ended.
type Latency struct {
	Mean *float64 `json:"mean"`
	P50  *float64 `json:"p50"`
	P95  *float64 `json:"p95"`
}

// ToolCallStats summarise tool calls per trial.
type ToolCallStats struct {
	Total int      `json:"total"`
	Mean  *float64 `json:"mean"`
}

// CaseRow is one row of the side-by-side matrix: one case under every
// variant.
type CaseRow struct {
	Case     string `json:"case"`
	Complete bool   `json:"complete"`
	// Differs is true for a complete case whose pass fraction is not the
	// same under every variant that has a graded trial.
	Differs  bool       `json:"differs"`
	Variants []CaseCell `json:"variants"`
}

// CaseCell counts one case under one variant.
type CaseCell struct {
	Variant string `json:"variant"`
	Passed  int    `json:"passed"`
	Graded  int    `json:"graded"`
	// Trials counts transcripts present; Planned is the trials per case.
	Trials  int `json:"trials"`
	Planned int `json:"planned"`
}

// Comparison compares variant B with variant A case by case, over the
// complete cases where both have a graded trial.
type Comparison struct {
	A string `json:"a"`
	B string `json:"b"`
	// Cases counts the paired cases; Unpaired the complete cases left out
	// because a variant had no graded trial there.
	Cases    int `json:"cases"`
	Unpaired int `json:"unpaired"`
	// MeanA and MeanB are the means of the per-case pass fractions.
	MeanA *float64 `json:"meanA"`
	MeanB *float64 `json:"meanB"`
	// MeanDifference is the mean of B−A over paired cases.
	MeanDifference *float64 `json:"meanDifference"`
	// Interval is the 95% percentile bootstrap interval of MeanDifference.
	Interval  *Interval `json:"interval"`
	Resamples int       `json:"resamples"`
	BBetter   int       `json:"bBetter"`
	ABetter   int       `json:"aBetter"`
	Ties      int       `json:"ties"`
	// SignTestP is the exact two-sided sign test p-value over the cases that
	// are not tied (1 when all are tied), null with no paired case.
	SignTestP *float64     `json:"signTestP"`
	PerCase   []PairedCase `json:"perCase"`
}

// PairedCase is one case's pass fraction under A and under B.
type PairedCase struct {
	Case string  `json:"case"`
	A    float64 `json:"a"`
	B    float64 `json:"b"`
}
