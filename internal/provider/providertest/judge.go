package providertest

import (
	"encoding/json"
	"strconv"
)

// A judge (package grade) sends one request per transcript: a system
// prompt and one user message whose text holds the rubric, the task (the
// case's prompt), and the answer and tool calls it grades. The helpers
// below script the judge model's side of that exchange:
//
//   - JudgeConversation answers the judge's requests about a task with
//     one reply: a verdict (JudgeReply), a malformed answer
//     (MalformedJudgeAnswers) or a refusal (JudgeRefusal).
//   - Errors and rate limits are Script.Faults, as for any client: a
//     Fault{Status: 429, Times: 3} answers the next three requests with
//     429, which the providers retry twice before the judge gives up.
//
// A conversation is matched by a substring of the first user text, which
// for a judge starts with the rubric and then the task, so the case's
// prompt (or part of it) picks the reply for that case's trials.

// JudgeReply is a verdict as a judge model writes it.
type JudgeReply struct {
	// Verdict is "pass" or "fail".
	Verdict string
	// Score is the score on the judge's scale.
	Score float64
	// Rationale says why.
	Rationale string
}

// Text is the reply as the JSON object MST's judges ask for.
func (r JudgeReply) Text() string {
	b, _ := json.Marshal(map[string]any{"verdict": r.Verdict, "score": r.Score, "rationale": r.Rationale})
	return string(b)
}

// Turn is a Turn that answers with the reply.
func (r JudgeReply) Turn() Turn { return Turn{Text: r.Text()} }

// JudgeConversation answers every judge request whose first user text
// contains match with turn (a JudgeReply's Turn, a malformed answer or a
// refusal). A judge asks once per transcript, so one turn is all.
func JudgeConversation(match string, turn Turn) Conversation {
	return Conversation{Match: match, Turns: []Turn{turn}}
}

// JudgeRefusal is a turn in which the judge model declines to grade, in
// the format's own shape (see Turn.Refusal).
func JudgeRefusal(text string) Turn { return Turn{Refusal: text} }

// MalformedAnswer is a judge answer that does not read as a verdict.
type MalformedAnswer struct {
	// Why says what is wrong with it.
	Why  string
	Turn Turn
}

// MalformedJudgeAnswers lists one answer of every kind a judge must not
// take for a verdict, on a scale that ends at max: prose without JSON, an
// empty answer, JSON cut short, JSON without a verdict, a verdict other
// than pass or fail, no score, a score above the scale, a score below it,
// a score that is not a number.
func MalformedJudgeAnswers(max int) []MalformedAnswer {
	over := strconv.Itoa(max + 1)
	return []MalformedAnswer{
		{"prose, no JSON", Turn{Text: "The answer looks right to me, I would give it a pass."}},
		{"an empty answer", Turn{Text: " "}},
		{"JSON cut short", Turn{Text: `{"verdict": "pass", "score": 3, "rationale": "fine"`}},
		{"no verdict", Turn{Text: `{"score": 3, "rationale": "fine"}`}},
		{"a verdict other than pass or fail", Turn{Text: `{"verdict": "maybe", "score": 3, "rationale": "unsure"}`}},
		{"no score", Turn{Text: `{"verdict": "pass", "rationale": "fine"}`}},
		{"a score above the scale", Turn{Text: `{"verdict": "pass", "score": ` + over + `, "rationale": "great"}`}},
		{"a score below the scale", Turn{Text: `{"verdict": "fail", "score": -1000, "rationale": "bad"}`}},
		{"a score that is not a number", Turn{Text: `{"verdict": "pass", "score": "high", "rationale": "fine"}`}},
	}
}
