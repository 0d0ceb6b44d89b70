package grade

import "strings"

// Built-in rubrics, by the name a judge's "rubric" field gives. Each is
// the text the judge model reads; docs/grading.md explains them to users.
const (
	RubricCorrect   = "correct"
	RubricRightTool = "rightTools"
	RubricSupported = "supported"
)

// rubric is one built-in rubric: its text, the input it reads by default,
// and whether it needs a reference.
type rubric struct {
	text      string
	input     string
	reference bool // a reference is required
}

var rubrics = map[string]rubric{
	RubricCorrect: {
		text: "The answer is correct: it agrees with the reference in every fact the reference states that the task asks for. " +
			"Wording, order and extra detail do not matter, as long as nothing in the answer contradicts the reference. " +
			"An answer that leaves out a fact the task asks for, or gets one wrong, fails.",
		input:     InputAnswer,
		reference: true,
	},
	RubricRightTool: {
		text: "The assistant used the right tools for the task: it called the tools a careful person would have called to answer it, " +
			"with arguments that match what the task says (the right city, date, file or value), and made no calls that the task did not need " +
			"or that could do harm. When a reference is given, it lists or describes the calls expected. " +
			"Judge the calls, not the final answer.",
		input: InputToolCalls,
	},
	RubricSupported: {
		text: "The answer makes no unsupported claims: every fact it states is backed by the tool results shown, by the task itself, " +
			"or is common knowledge. An answer that invents a number, a name, a date or an outcome that the tool results do not show fails, " +
			"even if the claim happens to be true. Saying that something is unknown is supported.",
		input: InputBoth,
	},
}

// rubricNames lists the built-in rubrics in the order errors list them.
func rubricNames() []string {
	return []string{RubricCorrect, RubricRightTool, RubricSupported}
}

// RubricText returns the text of a built-in rubric, or "" for an unknown
// name.
func RubricText(name string) string {
	return strings.TrimSpace(rubrics[name].text)
}
