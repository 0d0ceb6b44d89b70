package grade_test

import (
	"encoding/json"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/grade/gradertest"
)

// The built-in graders pass the suite a plugin's grader passes. The judge
// is left to its own tests (judge_test.go): it needs a model to answer.
func TestBuiltinsConform(t *testing.T) {
	t.Parallel()
	rain := gradertest.Answered("Oslo: rain all day")
	cases := map[string][]gradertest.Case{
		"answerContains": {
			{Name: "holds", Options: json.RawMessage(`"rain"`), Transcript: rain, Pass: true},
			{Name: "ignoring case", Options: json.RawMessage(`{"text": "RAIN", "ignoreCase": true}`), Transcript: rain, Pass: true},
			{Name: "lacks", Options: json.RawMessage(`"sun"`), Transcript: rain, Pass: false},
		},
		"answerMatches": {
			{Name: "matches", Options: json.RawMessage(`"r[a-z]+n"`), Transcript: rain, Pass: true},
			{Name: "does not", Options: json.RawMessage(`"^sun"`), Transcript: rain, Pass: false},
		},
		"toolCalled": {
			{Name: "called", Options: json.RawMessage(`"get_forecast"`), Transcript: rain, Pass: true},
			{Name: "with its arguments", Options: json.RawMessage(`{"tool": "get_forecast", "arguments": {"city": "Oslo"}}`), Transcript: rain, Pass: true},
			{Name: "other arguments", Options: json.RawMessage(`{"tool": "get_forecast", "arguments": {"city": "Bergen"}}`), Transcript: rain, Pass: false},
			{Name: "not called", Options: json.RawMessage(`"get_alerts"`), Transcript: rain, Pass: false},
		},
		"toolNotCalled": {
			{Name: "not called", Options: json.RawMessage(`"get_alerts"`), Transcript: rain, Pass: true},
			{Name: "called", Options: json.RawMessage(`"get_forecast"`), Transcript: rain, Pass: false},
		},
		"maxToolCalls": {
			{Name: "within", Options: json.RawMessage(`1`), Transcript: rain, Pass: true},
			{Name: "over", Options: json.RawMessage(`0`), Transcript: rain, Pass: false},
		},
	}
	tested := 0
	for _, def := range grade.Builtins() {
		cs, ok := cases[def.Name]
		if def.Name == "judge" {
			continue
		}
		if !ok {
			t.Errorf("built-in grader %s has no cases here", def.Name)
			continue
		}
		tested++
		t.Run(def.Name, func(t *testing.T) {
			t.Parallel()
			if len(def.Options) == 0 || def.Description == "" {
				t.Errorf("%s has no options schema or no description", def.Name)
			}
			gradertest.Run(t, def, cs)
		})
	}
	if tested != len(cases) {
		t.Errorf("tested %d built-in graders, want %d", tested, len(cases))
	}
}
