package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mst-eval/mst/transcript"
)

// Grader scores one transcript. Implementations hold no mutable state, so
// Grade may be called concurrently.
type Grader interface {
	// Name is a short human label such as `toolCalled get_forecast{city:"Oslo"}`.
	Name() string
	// Grade scores t. It never modifies t.
	Grade(t *transcript.Transcript) Result
}

// Result is what one grader said about one transcript.
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
	transcript.Key
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

// Summary is what a report needs of one transcript.
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
func Summarize(t *transcript.Transcript) Summary {
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

// Trial grades one transcript with graders, in order.
//
// Which outcomes are graded:
//
//   - answered: graded; it passes when every grader passes (with no
//     graders at all, it passes).
//   - no-answer and timed-out: graded, and always failed. Every grader
//     still runs and its result is kept, so a reader sees what the trial
//     did (a tool it called, say), and Failed says why the trial failed
//     even when every grader passed. Only an answered trial can pass.
//   - errored, cancelled, skipped, and any other or empty status: not
//     graded and without results. An infrastructure failure, an
//     interrupted or a never-started trial is neither a pass nor a
//     failure; pass rates leave it out.
//
// Judges (ContextGrader) are asked through Trial with no Judges, so they
// give errors; grading with judges goes through TrialContext.
func Trial(t *transcript.Transcript, graders []Grader) TrialGrade {
	return TrialContext(context.Background(), t, graders, nil)
}

// TrialContext is Trial with a context and the Judges that judges reach
// their models through. A grader that decides the trial (not Advisory)
// and gives an Error makes the whole grade errored: Graded false, Errored
// set, the other results kept.
func TrialContext(ctx context.Context, t *transcript.Transcript, graders []Grader, judges *Judges) TrialGrade {
	g := TrialGrade{Key: t.Key, Trial: Summarize(t)}
	status := t.Outcome.Status
	switch status {
	case transcript.Answered, transcript.NoAnswer, transcript.TimedOut:
	default:
		return g
	}
	g.Graded = true
	g.Passed = status == transcript.Answered
	if len(graders) > 0 {
		g.Results = make([]Result, 0, len(graders))
	}
	for _, gr := range graders {
		var r Result
		if cg, ok := gr.(ContextGrader); ok {
			r = cg.GradeWith(ctx, t, judges)
		} else {
			r = gr.Grade(t)
		}
		g.Results = append(g.Results, r)
		switch {
		case r.FailsTrial():
			g.Passed = false
		case !r.Advisory && r.Error != "":
			if g.Errored == "" {
				g.Errored = r.Grader + ": " + r.Error
			}
		}
	}
	if g.Errored != "" {
		g.Graded, g.Passed = false, false
		return g
	}
	if status != transcript.Answered {
		g.Failed = "the trial ended " + status + ", without an answer; only an answered trial can pass"
	}
	return g
}

// ParseAll parses a list of specs. Its error names the index of the first
// bad spec: "[2]: unknown grader ...". An empty list gives no graders and no
// error.
func ParseAll(specs []json.RawMessage) ([]Grader, error) {
	gs := make([]Grader, 0, len(specs))
	for i, s := range specs {
		g, err := Parse(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		gs = append(gs, g)
	}
	return gs, nil
}
