package grade

import (
	"encoding/json"
	"fmt"
	"time"

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
}

// TrialGrade is the grade of one trial, with the few facts of its
// transcript a report needs, so a report is built from grades alone.
type TrialGrade struct {
	transcript.Key
	// Graded is false for errored and cancelled trials: infrastructure
	// failures are neither passes nor failures.
	Graded bool `json:"graded"`
	// Passed is true when the trial was graded and every result passed.
	Passed  bool     `json:"passed"`
	Results []Result `json:"results,omitempty"`
	// Trial is what the transcript said; it is zero in the grades of runs
	// made before it was recorded (Status is then empty).
	Trial Summary `json:"transcript,omitzero"`
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
	}
}

// Trial grades one transcript with graders, in order.
//
// Answered, no-answer and timed-out trials are graded. A trial without an
// answer fails every grader of the answer because its Answer is empty, but
// may pass graders of tool calls. A graded trial passes when there is at
// least one grader and all of them pass; with no graders at all, an answered
// trial passes and the others fail. Errored and cancelled trials (and
// transcripts with an unknown status) are not graded and have no results.
func Trial(t *transcript.Transcript, graders []Grader) TrialGrade {
	g := TrialGrade{Key: t.Key, Trial: Summarize(t)}
	switch t.Outcome.Status {
	case transcript.Answered, transcript.NoAnswer, transcript.TimedOut:
	default:
		return g
	}
	g.Graded = true
	if len(graders) == 0 {
		g.Passed = t.Outcome.Status == transcript.Answered
		return g
	}
	g.Passed = true
	g.Results = make([]Result, 0, len(graders))
	for _, gr := range graders {
		r := gr.Grade(t)
		g.Results = append(g.Results, r)
		if !r.Passed {
			g.Passed = false
		}
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
