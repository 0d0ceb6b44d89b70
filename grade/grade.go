package grade

import (
	"context"

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

// The grade records are transcript's: the store keeps them without
// compiling a grader. These names are kept for graders' authors.
type (
	Result     = transcript.Result
	TrialGrade = transcript.TrialGrade
	Summary    = transcript.Summary
	Verdict    = transcript.Verdict
	Scale      = transcript.Scale
)

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
	g := TrialGrade{Key: t.Key, Trial: transcript.Summarize(t)}
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
