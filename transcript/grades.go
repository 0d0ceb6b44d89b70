package transcript

import (
	"strings"
	"time"
	"unicode/utf8"
)

// The records of grading: what graders and judges said of one trial, kept
// by the result store beside the transcripts. They live here, with the
// transcript they describe, so a store keeps them without compiling a
// grader, a judge or a provider.

// Result is what one grader said about one
type Result struct {
	// Grader is the grader's Name.
	Grader string `json:"grader"`
	Passed bool   `json:"passed"`
	// Detail says why the grader failed, in words; it is empty on a pass.
	Detail string `json:"detail,omitempty"`
	// Error says why the grader could give no verdict (a judge whose model
	// failed, refused or answered in another shape). Passed is then false,
	// and the trial's grade is errored, not failed, unless the result is
	// Advisory.
	Error string `json:"error,omitempty"`
	// Advisory marks a result that does not decide whether the trial
	// passes (a judge with gate: false): it is recorded and reported only.
	Advisory bool `json:"advisory,omitempty"`
	// Judge is a judge's verdict, score and rationale; nil for the
	// deterministic graders. A judge that errored has only its Hash,
	// Model and Scale here, and no Verdict.
	Judge *Verdict `json:"judge,omitempty"`
}

// FailsTrial reports whether r fails the trial it grades: a grader that
// decides (not Advisory) gave a verdict (no Error) and it is not a pass.
// An Advisory result never fails a trial, whatever it says; a deciding
// result with an Error makes the grade errored instead. TrialContext and
// every check of a grade made elsewhere (a grade worker's) go by it.
func (r Result) FailsTrial() bool { return !r.Advisory && r.Error == "" && !r.Passed }

// TrialGrade is the grade of one trial, with the few facts of its
// transcript a report needs, so a report is built from grades alone.
type TrialGrade struct {
	Key
	// Graded is false for errored, cancelled and skipped trials (and
	// unknown statuses): they are neither passes nor failures.
	Graded bool `json:"graded"`
	// Passed is true when the trial was answered, was graded and every
	// result passed.
	Passed  bool     `json:"passed"`
	Results []Result `json:"results,omitempty"`
	// Failed says why a graded trial failed when its results do not: a
	// no-answer or timed-out trial fails whatever its graders said. It is
	// empty otherwise.
	Failed string `json:"failed,omitempty"`
	// Trial is what the transcript said; it is zero in the grades of runs
	// made before it was recorded (Status is then empty).
	Trial Summary `json:"transcript,omitzero"`
	// Errored says why the trial could not be graded although it ran to
	// an end: a grader that decides the trial gave no verdict (Result.Error
	// of a judge). Graded and Passed are then false: an errored grade is
	// neither a pass nor a failure, and grading the trial again may give
	// one.
	Errored string `json:"errored,omitempty"`
	// Superseded marks a grade that stands for no transcript: the trial's
	// transcript is about to be replaced (a resumed run's retry), so the
	// trial must be graded again, whatever is stored when it is next read.
	Superseded bool `json:"superseded,omitempty"`
}

// Summary is what a report needs of one
type Summary struct {
	Status       string  `json:"status"`
	Cause        string  `json:"cause,omitempty"`
	Client       string  `json:"client,omitempty"`
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"inputTokens,omitempty"`
	OutputTokens int64   `json:"outputTokens,omitempty"`
	DurationMs   float64 `json:"durationMs,omitempty"`
	ToolCalls    int     `json:"toolCalls,omitempty"`
	// Detail is the first line of the outcome's detail (an error message,
	// why a trial was skipped), cut to summaryDetailMax bytes, so a report
	// can show why trials were not graded without their transcripts.
	Detail string `json:"detail,omitempty"`
	// Ended is when the trial ended: it tells a grade of an older
	// transcript of the same trial from one of the transcript stored now.
	Ended time.Time `json:"ended,omitzero"`
}

// Summarize reduces a transcript to what a report needs of it.
func Summarize(t *Transcript) Summary {
	return Summary{
		Status: t.Outcome.Status, Cause: t.Outcome.Cause, Client: t.Client.Name, Model: t.Model,
		InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens,
		DurationMs: t.Timing.DurationMs, ToolCalls: len(t.ToolCalls), Ended: t.Timing.Ended,
		Detail: summaryDetail(t.Outcome.Detail),
	}
}

// summaryDetailMax bounds Summary.Detail in bytes.
const summaryDetailMax = 300

// summaryDetail returns the first non-blank line of detail, trimmed, and
// cut to at most summaryDetailMax bytes without splitting a UTF-8 sequence
// (a cut line ends in "…", which the bound includes).
func summaryDetail(detail string) string {
	line := ""
	for l := range strings.Lines(detail) {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	if len(line) <= summaryDetailMax {
		return line
	}
	const ellipsis = "…"
	cut := summaryDetailMax - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + ellipsis
}

// Scale is the range of a judge's score, both ends included.
type Scale struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Verdict is what a judge said about one
type Verdict struct {
	// Hash identifies the judge: its prompt (rubric, scale, input), model
	// and settings, but not the case's reference or the  Two
	// grades with the same hash were made by the same judge.
	Hash  string `json:"hash"`
	Model string `json:"model"`
	// Verdict is "pass" or "fail", as the judge model said; "" when the
	// judge errored (Result.Error says why).
	Verdict   string  `json:"verdict"`
	Score     float64 `json:"score"`
	Scale     Scale   `json:"scale"`
	Rationale string  `json:"rationale,omitempty"`
	// InputTokens and OutputTokens are the judge model's usage.
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
}
