// Package grade scores transcripts with deterministic graders.
//
// A grader spec is a JSON object with exactly one key, the grader's name,
// whose value configures it:
//
//	{"answerContains": "12°C"}
//	{"answerContains": {"text": "oslo", "ignoreCase": true}}
//	{"answerMatches": "\\d+ ?°C"}
//	{"toolCalled": "get_forecast"}
//	{"toolCalled": {"tool": "get_forecast", "server": "weather", "arguments": {"city": "Oslo"}}}
//	{"toolNotCalled": "delete_file"}
//	{"toolNotCalled": {"tool": "delete_file", "server": "fs"}}
//	{"maxToolCalls": 5}
//
// Specs come from the eval config's graders list and from each case's
// expect list; a trial is scored by both. Schema returns the JSON Schema of
// one spec, which the config's schema embeds.
//
// Parse checks a spec completely (types, unknown keys, regular expressions),
// so a Grader that parsed cannot fail later: Grade always returns a Result.
// Its errors name the path inside the spec but no file; the caller puts the
// file and the list index in front ("eval.yaml: graders[2]: ").
//
// Graders hold no state: Grade may be called from any goroutine and never
// changes the transcript. Trial applies a list of graders to one transcript
// and decides whether the trial passed; errored and cancelled trials are not
// graded at all, because an infrastructure failure is neither a pass nor a
// failure.
package grade
