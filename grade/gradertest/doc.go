// Package gradertest is the conformance suite of grader kinds that plugins
// add (grade.Definition), the way testing/fstest checks an fs.FS: a
// plugin's own tests call Run with its definition and a few cases, and the
// suite checks the contract grade.Definition and grade.Grader state.
//
// For the definition as a whole:
//
//   - New is set, and the Options schema, when there is one, is a JSON
//     object that compiles as a JSON Schema (draft 2020-12 by default);
//   - New rejects, with an error that says something, every value the
//     schema rejects among a few bad ones: "x", [1], 42, null, and an
//     object with an unknown key when the schema forbids them
//     (additionalProperties false). A case's expect list reaches New
//     without the schema check, so New must be as strict as the schema.
//     A definition without a schema must reject "x" and [1].
//
// For each Case:
//
//   - its options pass the schema, and New accepts them with a non-nil
//     Grader; Name may be empty (MST then labels the grader's results with
//     its full name alone);
//   - Grade gives the verdict the case expects, no Error, and a Detail on
//     a fail;
//   - Grade does not modify the transcript;
//   - Grade gives the same result when many goroutines grade at once (run
//     the tests with -race to catch data races as well);
//   - Grade gives a verdict or an Error, never a panic and never a fail
//     without a Detail, on odd transcripts made from the case's: Unicode
//     in the prompt and answer, a 1 MiB answer, no tool calls at all, and
//     an errored trial without an answer (which MST never grades, but a
//     grader must survive).
//
// Call it from a test of the plugin's own module:
//
//	func TestAnswerLength(t *testing.T) {
//		gradertest.Run(t, answerlength.Definition(), []gradertest.Case{
//			{Name: "short", Options: json.RawMessage(`{"max": 5}`), Transcript: gradertest.Answered("hi"), Pass: true},
//			{Name: "long", Options: json.RawMessage(`{"max": 1}`), Transcript: gradertest.Answered("hello"), Pass: false},
//		})
//	}
//
// Give at least one passing and one failing case. Check is the same suite
// returning its problems as an error instead of failing a test, for tests
// of the suite itself and for tools.
package gradertest
