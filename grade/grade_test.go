package grade

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mst-eval/mst/transcript"
)

// answered returns an answered transcript with the given answer and calls.
func answered(answer string, calls ...transcript.ToolCall) *transcript.Transcript {
	return &transcript.Transcript{
		Key:       transcript.Key{Case: "oslo", Variant: "clear", Trial: 1},
		Answer:    answer,
		ToolCalls: calls,
		Outcome:   transcript.Outcome{Status: transcript.Answered},
	}
}

// call returns a tool call on server with raw JSON arguments.
func call(server, tool, args string) transcript.ToolCall {
	return transcript.ToolCall{Server: server, Tool: tool, Arguments: json.RawMessage(args)}
}

func mustParse(t *testing.T, spec string) Grader {
	t.Helper()
	g, err := Parse(json.RawMessage(spec))
	if err != nil {
		t.Fatalf("Parse(%s) = %v", spec, err)
	}
	return g
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, want string
	}{
		{`"toolCalled"`, `a grader must be an object with one key, such as {"toolCalled": "get_forecast"}, not a string`},
		{`[]`, `a grader must be an object with one key, such as {"toolCalled": "get_forecast"}, not an array`},
		{`null`, `a grader must be an object with one key, such as {"toolCalled": "get_forecast"}, not null`},
		{`{}`, `empty grader: give one of answerContains, answerMatches, judge, maxToolCalls, toolCalled, toolNotCalled`},
		{`{"answerContains": "a", "toolCalled": "b"}`, `exactly one grader key per entry, found answerContains and toolCalled; split them into separate entries`},
		{`{"maxToolCalls": 1, "toolCalled": "b", "answerMatches": "c"}`, `exactly one grader key per entry, found maxToolCalls, toolCalled and answerMatches; split them into separate entries`},
		{`{"toolCalled": "a", "toolCalled": "b"}`, `reading grader: key "toolCalled" appears twice`},
		{`{"tooCalled": "x"}`, `unknown grader "tooCalled" (did you mean toolCalled?)`},
		{`{"toolcalled": "x"}`, `unknown grader "toolcalled" (did you mean toolCalled?)`},
		{`{"answerContain": "x"}`, `unknown grader "answerContain" (did you mean answerContains?)`},
		{`{"jduge": "x"}`, `unknown grader "jduge" (did you mean judge?)`},
		{`{"verdict": "x"}`, `unknown grader "verdict" (known: answerContains, answerMatches, judge, maxToolCalls, toolCalled, toolNotCalled)`},

		{`{"answerContains": ""}`, `answerContains: the text must not be empty (every answer contains it)`},
		{`{"answerContains": 12}`, `answerContains: must be a string or an object like {"text": "…", "ignoreCase": true}, not a number`},
		{`{"answerContains": {"ignoreCase": true}}`, `answerContains.text: required (the text the answer must contain)`},
		{`{"answerContains": {"text": 3}}`, `answerContains.text: must be a string, not a number`},
		{`{"answerContains": {"text": "a", "ignoreCase": "yes"}}`, `answerContains.ignoreCase: must be true or false, not a string`},
		{`{"answerContains": {"text": "a", "ignorecase": true}}`, `answerContains.ignorecase: unknown field (did you mean ignoreCase?)`},
		{`{"answerContains": {"text": "a", "other": 1}}`, `answerContains.other: unknown field (known: text, ignoreCase)`},

		{`{"answerMatches": ""}`, `answerMatches: the regular expression must not be empty (it matches every answer)`},
		{`{"answerMatches": ["a"]}`, `answerMatches: must be a string, not an array`},
		{`{"answerMatches": "ab[c"}`, `answerMatches: invalid regular expression "ab[c": missing closing ] at character 3 ("[c") (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)`},
		{`{"answerMatches": "(abc"}`, `answerMatches: invalid regular expression "(abc": missing closing ) (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)`},
		{`{"answerMatches": "a**"}`, `answerMatches: invalid regular expression "a**": invalid nested repetition operator at character 2 ("**") (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)`},
		{`{"answerMatches": "é\\q"}`, `answerMatches: invalid regular expression "é\\q": invalid escape sequence at character 2 ("\\q") (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)`},
		{`{"answerMatches": "x(?!y)"}`, `answerMatches: invalid regular expression "x(?!y)": invalid or unsupported Perl syntax at character 2 ("(?!"); lookahead and lookbehind are not supported (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)`},
		{`{"answerMatches": "a\\"}`, `answerMatches: invalid regular expression "a\\": trailing backslash at end of expression at the end; write \\ for a literal backslash (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)`},
		{`{"answerMatches": "(?<=a)b"}`, `answerMatches: invalid regular expression "(?<=a)b": invalid named capture; lookahead and lookbehind are not supported (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)`},

		{`{"toolCalled": ""}`, `toolCalled: the tool name must not be empty`},
		{`{"toolCalled": true}`, `toolCalled: must be a tool name or an object like {"tool": "…", "server": "…", "arguments": {…}}, not a boolean`},
		{`{"toolCalled": {}}`, `toolCalled.tool: required (the name of the tool)`},
		{`{"toolCalled": {"tool": ""}}`, `toolCalled.tool: must not be empty`},
		{`{"toolCalled": {"tool": 1}}`, `toolCalled.tool: must be a string, not a number`},
		{`{"toolCalled": {"tool": "a", "server": ""}}`, `toolCalled.server: must not be empty; leave it out to accept any server`},
		{`{"toolCalled": {"tool": "a", "server": null}}`, `toolCalled.server: must be a string, not null`},
		{`{"toolCalled": {"tool": "a", "arguments": "city=Oslo"}}`, `toolCalled.arguments: must be an object, not a string`},
		{`{"toolCalled": {"tool": "a", "arguments": [1]}}`, `toolCalled.arguments: must be an object, not an array`},
		{`{"toolCalled": {"tool": "a", "args": {}}}`, `toolCalled.args: unknown field (known: tool, server, arguments)`},
		{`{"toolCalled": {"tool": "a", "servr": "w"}}`, `toolCalled.servr: unknown field (did you mean server?)`},

		{`{"toolNotCalled": ""}`, `toolNotCalled: the tool name must not be empty`},
		{`{"toolNotCalled": 5}`, `toolNotCalled: must be a tool name or an object like {"tool": "…", "server": "…"}, not a number`},
		{`{"toolNotCalled": {"tool": "a", "arguments": {}}}`, `toolNotCalled.arguments: unknown field (known: tool, server)`},
		{`{"toolNotCalled": {"server": "w"}}`, `toolNotCalled.tool: required (the name of the tool)`},

		{`{"maxToolCalls": -1}`, `maxToolCalls: must be a whole number of 0 or more, such as 5, not -1`},
		{`{"maxToolCalls": 2.5}`, `maxToolCalls: must be a whole number of 0 or more, such as 5, not 2.5`},
		{`{"maxToolCalls": "5"}`, `maxToolCalls: must be a whole number of 0 or more, such as 5, not a string`},
		{`{"maxToolCalls": null}`, `maxToolCalls: must be a whole number of 0 or more, such as 5, not null`},
		{`{"maxToolCalls": 1e12}`, `maxToolCalls: 1e12 is too large`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			g, err := Parse(json.RawMessage(tt.spec))
			if err == nil {
				t.Fatalf("Parse(%s) = %s, want error %q", tt.spec, g.Name(), tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Parse(%s) error (-want +got):\n%s", tt.spec, diff)
			}
		})
	}
}

func TestParseNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, want string
	}{
		{`{"answerContains": "12°C"}`, `answerContains "12°C"`},
		{`{"answerContains": {"text": "oslo", "ignoreCase": true}}`, `answerContains "oslo" (ignoring case)`},
		{`{"answerContains": {"text": "oslo", "ignoreCase": false}}`, `answerContains "oslo"`},
		{`{"answerMatches": "\\d+ ?°C"}`, `answerMatches /\d+ ?°C/`},
		{`{"toolCalled": "get_forecast"}`, `toolCalled get_forecast`},
		{`{"toolCalled": {"tool": "get_forecast", "arguments": {"city": "Oslo"}}}`, `toolCalled get_forecast{city:"Oslo"}`},
		{`{"toolCalled": {"tool": "get_forecast", "server": "weather", "arguments": {"days": 3.0, "city": "Oslo", "opts": {"units": ["C"]}, "a b": null}}}`,
			`toolCalled get_forecast{"a b":null,city:"Oslo",days:3.0,opts:{units:["C"]}} on weather`},
		{`{"toolCalled": {"tool": "get_forecast", "arguments": {}}}`, `toolCalled get_forecast{}`},
		{`{"toolNotCalled": "delete_file"}`, `toolNotCalled delete_file`},
		{`{"toolNotCalled": {"tool": "delete_file", "server": "fs"}}`, `toolNotCalled delete_file on fs`},
		{`{"maxToolCalls": 0}`, `maxToolCalls 0`},
		{` { "maxToolCalls" : 5.0 } `, `maxToolCalls 5`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			if got := mustParse(t, tt.spec).Name(); got != tt.want {
				t.Errorf("Parse(%s).Name() = %q, want %q", tt.spec, got, tt.want)
			}
		})
	}
}

func TestGrade(t *testing.T) {
	t.Parallel()
	timedOut := &transcript.Transcript{
		ToolCalls: []transcript.ToolCall{call("weather", "get_forecast", `{"city":"Oslo"}`)},
		Outcome:   transcript.Outcome{Status: transcript.TimedOut},
	}
	weather := answered("It will be 12°C in Oslo.",
		call("weather", "search_city", `{"name":"Oslo"}`),
		call("weather", "get_forecast", `{"city":"Bergen","days":3}`),
		call("weather", "get_forecast", `{"city":"Oslo","days":3.0,"options":{"units":"metric","hourly":false},"tags":["a",{"b":1,"c":2}]}`),
	)
	tests := []struct {
		name, spec string
		t          *transcript.Transcript
		passed     bool
		detail     string
	}{
		{"contains", `{"answerContains": "12°C"}`, weather, true, ""},
		{"contains case differs", `{"answerContains": "12°c"}`, weather, false, `answer does not contain "12°c"`},
		{"contains ignoring case", `{"answerContains": {"text": "OSLO", "ignoreCase": true}}`, weather, true, ""},
		{"contains ignoring case, special characters", `{"answerContains": {"text": "12°C IN oslo.", "ignoreCase": true}}`, weather, true, ""},
		{"contains ignoring case fails", `{"answerContains": {"text": "bergen", "ignoreCase": true}}`, weather, false, `answer does not contain "bergen", even ignoring case`},
		{"contains, timed out", `{"answerContains": "12°C"}`, timedOut, false, "there is no answer (the trial ended timed-out)"},
		{"contains, empty answer", `{"answerContains": "12°C"}`, answered(""), false, "the answer is empty"},

		{"matches", `{"answerMatches": "\\d+ ?°C"}`, weather, true, ""},
		{"matches anchored fails", `{"answerMatches": "^\\d+"}`, weather, false, `answer does not match /^\d+/`},
		{"matches flags", `{"answerMatches": "(?i)^it WILL"}`, weather, true, ""},
		{"matches, timed out", `{"answerMatches": "."}`, timedOut, false, "there is no answer (the trial ended timed-out)"},

		{"called", `{"toolCalled": "get_forecast"}`, weather, true, ""},
		{"called, timed out (the grader passes; Trial fails the trial)", `{"toolCalled": "get_forecast"}`, timedOut, true, ""},
		{"called 0 times", `{"toolCalled": "get_alerts"}`, weather, false, "get_alerts was called 0 times"},
		{"called on server", `{"toolCalled": {"tool": "get_forecast", "server": "weather"}}`, weather, true, ""},
		{"called on other server", `{"toolCalled": {"tool": "get_forecast", "server": "meteo"}}`, weather, false,
			"get_forecast was called 2 times, but never on server meteo (only on weather)"},
		{"called with arguments", `{"toolCalled": {"tool": "get_forecast", "arguments": {"city": "Oslo"}}}`, weather, true, ""},
		{"called with numbers compared by value", `{"toolCalled": {"tool": "get_forecast", "arguments": {"city": "Bergen", "days": 3.0}}}`, weather, true, ""},
		{"called with exponent number", `{"toolCalled": {"tool": "get_forecast", "arguments": {"days": 0.3e1}}}`, weather, true, ""},
		{"called with nested subset", `{"toolCalled": {"tool": "get_forecast", "arguments": {"options": {"units": "metric"}}}}`, weather, true, ""},
		{"called with false", `{"toolCalled": {"tool": "get_forecast", "arguments": {"options": {"hourly": false}}}}`, weather, true, ""},
		{"called with array of objects", `{"toolCalled": {"tool": "get_forecast", "arguments": {"tags": ["a", {"c": 2}]}}}`, weather, true, ""},
		{"called with empty arguments", `{"toolCalled": {"tool": "get_forecast", "arguments": {}}}`, weather, true, ""},
		{"called, wrong value", `{"toolCalled": {"tool": "get_forecast", "arguments": {"city": "Tromsø"}}}`, weather, false,
			`get_forecast was called 2 times, never with matching arguments (first call: city is "Bergen", want "Tromsø")`},
		{"called, strings compared exactly", `{"toolCalled": {"tool": "search_city", "arguments": {"name": "oslo"}}}`, weather, false,
			`search_city was called once, with other arguments: name is "Oslo", want "oslo"`},
		{"called, number against string", `{"toolCalled": {"tool": "get_forecast", "arguments": {"city": "Oslo", "days": "3"}}}`, weather, false,
			`get_forecast was called 2 times, never with matching arguments (first call: city is "Bergen", want "Oslo")`},
		{"called, missing key", `{"toolCalled": {"tool": "search_city", "arguments": {"country": "NO"}}}`, weather, false,
			`search_city was called once, with other arguments: country is missing, want "NO"`},
		{"called, nested mismatch", `{"toolCalled": {"tool": "get_forecast", "server": "weather", "arguments": {"city": "Oslo", "options": {"units": "imperial"}}}}`, weather, false,
			`get_forecast was called 2 times, never with matching arguments (first call: city is "Bergen", want "Oslo")`},
		{"called, array length", `{"toolCalled": {"tool": "get_forecast", "arguments": {"city": "Oslo", "tags": ["a"]}}}`, weather, false,
			`get_forecast was called 2 times, never with matching arguments (first call: city is "Bergen", want "Oslo")`},
		{"called, array length only call", `{"toolCalled": {"tool": "x", "arguments": {"tags": ["a"]}}}`, answered("", call("s", "x", `{"tags":["a","b"]}`)), false,
			`x was called once, with other arguments: tags has 2 items, want 1`},
		{"called, object wanted", `{"toolCalled": {"tool": "x", "arguments": {"o": {"k": 1}}}}`, answered("", call("s", "x", `{"o":[1]}`)), false,
			`x was called once, with other arguments: o is [1], want an object`},
		{"called, array wanted", `{"toolCalled": {"tool": "x", "arguments": {"o": [1]}}}`, answered("", call("s", "x", `{"o":1}`)), false,
			`x was called once, with other arguments: o is 1, want an array`},
		{"called, deep path", `{"toolCalled": {"tool": "x", "arguments": {"a": [{"b": {"my key": 1}}]}}}`, answered("", call("s", "x", `{"a":[{"b":{"my key":2}}]}`)), false,
			`x was called once, with other arguments: a[0].b["my key"] is 2, want 1`},
		{"called, null matches null", `{"toolCalled": {"tool": "x", "arguments": {"a": null}}}`, answered("", call("s", "x", `{"a":null}`)), true, ""},
		{"called, null against missing", `{"toolCalled": {"tool": "x", "arguments": {"a": null}}}`, answered("", call("s", "x", `{}`)), false,
			`x was called once, with other arguments: a is missing, want null`},
		{"called, big integers exact", `{"toolCalled": {"tool": "x", "arguments": {"n": 9007199254740993}}}`, answered("", call("s", "x", `{"n":9007199254740992}`)), false,
			`x was called once, with other arguments: n is 9007199254740992, want 9007199254740993`},
		{"called, huge exponent", `{"toolCalled": {"tool": "x", "arguments": {"n": 1}}}`, answered("", call("s", "x", `{"n":1e999999999999}`)), false,
			`x was called once, with other arguments: n is 1e999999999999, want 1`},
		{"called, null arguments", `{"toolCalled": {"tool": "x", "arguments": {}}}`, answered("", call("s", "x", `null`)), true, ""},
		{"called, no arguments", `{"toolCalled": {"tool": "x", "arguments": {"a": 1}}}`, answered("", call("s", "x", ``)), false,
			`x was called once, with other arguments: a is missing, want 1`},
		{"called, arguments not an object", `{"toolCalled": {"tool": "x", "arguments": {"a": 1}}}`, answered("", call("s", "x", `"a=1"`)), false,
			`x was called once, with other arguments: arguments is "a=1", want an object`},
		{"called, invalid arguments", `{"toolCalled": {"tool": "x", "arguments": {"a": 1}}}`, answered("", call("s", "x", `{"a":`)), false,
			`x was called once, with other arguments: its arguments are not valid JSON`},
		{"called, long value cut", `{"toolCalled": {"tool": "x", "arguments": {"q": "short"}}}`, answered("", call("s", "x", `{"q":"`+strings.Repeat("abc", 30)+`"}`)), false,
			`x was called once, with other arguments: q is "` + strings.Repeat("abc", 18) + `ab…, want "short"`},
		{"called, failed call still counts", `{"toolCalled": {"tool": "x", "arguments": {"a": 1}}}`,
			answered("", transcript.ToolCall{Server: "s", Tool: "x", Arguments: json.RawMessage(`{"a":1}`), Error: "connection reset"}), true, ""},

		{"not called", `{"toolNotCalled": "delete_file"}`, weather, true, ""},
		{"not called fails", `{"toolNotCalled": "get_forecast"}`, weather, false, "get_forecast was called 2 times"},
		{"not called fails once", `{"toolNotCalled": "search_city"}`, weather, false, "search_city was called once"},
		{"not called on other server", `{"toolNotCalled": {"tool": "get_forecast", "server": "meteo"}}`, weather, true, ""},
		{"not called on server fails", `{"toolNotCalled": {"tool": "get_forecast", "server": "weather"}}`, weather, false, "get_forecast was called 2 times on server weather"},

		{"max calls", `{"maxToolCalls": 3}`, weather, true, ""},
		{"max calls exceeded", `{"maxToolCalls": 2}`, weather, false, "3 tool calls, more than the limit of 2"},
		{"max zero calls", `{"maxToolCalls": 0}`, answered("hi"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := mustParse(t, tt.spec)
			want := Result{Grader: g.Name(), Passed: tt.passed, Detail: tt.detail}
			if diff := cmp.Diff(want, g.Grade(tt.t)); diff != "" {
				t.Errorf("Parse(%s).Grade(…) (-want +got):\n%s", tt.spec, diff)
			}
		})
	}
}

func TestTrial(t *testing.T) {
	t.Parallel()
	key := transcript.Key{Case: "oslo", Variant: "clear", Trial: 2}
	tr := func(status, answer string) *transcript.Transcript {
		return &transcript.Transcript{
			Key:       key,
			Answer:    answer,
			ToolCalls: []transcript.ToolCall{call("weather", "get_forecast", `{"city":"Oslo"}`)},
			Outcome:   transcript.Outcome{Status: status},
		}
	}
	contains := Result{Grader: `answerContains "12°C"`, Passed: true}
	containsFail := Result{Grader: `answerContains "12°C"`, Detail: `answer does not contain "12°C"`}
	containsNone := func(status string) Result {
		return Result{Grader: `answerContains "12°C"`, Detail: "there is no answer (the trial ended " + status + ")"}
	}
	called := Result{Grader: "toolCalled get_forecast", Passed: true}
	graders := []string{`{"answerContains": "12°C"}`, `{"toolCalled": "get_forecast"}`}
	failed := func(status string) string {
		return "the trial ended " + status + ", without an answer; only an answered trial can pass"
	}
	tests := []struct {
		name    string
		t       *transcript.Transcript
		graders []string
		want    TrialGrade
	}{
		{"answered passes", tr(transcript.Answered, "12°C"), graders,
			TrialGrade{Key: key, Graded: true, Passed: true, Results: []Result{contains, called}}},
		{"answered fails one", tr(transcript.Answered, "warm"), graders,
			TrialGrade{Key: key, Graded: true, Results: []Result{containsFail, called}}},
		{"no answer fails answer graders", tr(transcript.NoAnswer, ""), graders,
			TrialGrade{Key: key, Graded: true, Results: []Result{containsNone(transcript.NoAnswer), called}, Failed: failed(transcript.NoAnswer)}},
		{"timed out fails answer graders", tr(transcript.TimedOut, ""), graders,
			TrialGrade{Key: key, Graded: true, Results: []Result{containsNone(transcript.TimedOut), called}, Failed: failed(transcript.TimedOut)}},
		{"timed out fails though its tool graders pass", tr(transcript.TimedOut, ""), graders[1:],
			TrialGrade{Key: key, Graded: true, Results: []Result{called}, Failed: failed(transcript.TimedOut)}},
		{"errored is not graded", tr(transcript.Errored, ""), graders, TrialGrade{Key: key}},
		{"cancelled is not graded", tr(transcript.Cancelled, ""), graders, TrialGrade{Key: key}},
		{"skipped is not graded", tr(transcript.Skipped, ""), graders, TrialGrade{Key: key}},
		{"unknown status is not graded", tr("exploded", ""), graders, TrialGrade{Key: key}},
		{"no graders, answered passes", tr(transcript.Answered, "x"), nil, TrialGrade{Key: key, Graded: true, Passed: true}},
		{"no graders, no answer fails", tr(transcript.NoAnswer, ""), nil, TrialGrade{Key: key, Graded: true, Failed: failed(transcript.NoAnswer)}},
		{"no graders, timed out fails", tr(transcript.TimedOut, ""), nil, TrialGrade{Key: key, Graded: true, Failed: failed(transcript.TimedOut)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gs []Grader
			for _, s := range tt.graders {
				gs = append(gs, mustParse(t, s))
			}
			want := tt.want
			want.Trial = transcript.Summarize(tt.t)
			if diff := cmp.Diff(want, Trial(tt.t, gs)); diff != "" {
				t.Errorf("Trial(%s, %d graders) (-want +got):\n%s", tt.t.Outcome.Status, len(gs), diff)
			}
		})
	}
}

func TestTrialGradeJSON(t *testing.T) {
	t.Parallel()
	g := TrialGrade{
		Key:     transcript.Key{Case: "oslo", Variant: "clear", Trial: 1},
		Graded:  true,
		Results: []Result{{Grader: "maxToolCalls 0", Detail: "1 tool calls, more than the limit of 0"}},
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"case":"oslo","variant":"clear","trial":1,"graded":true,"passed":false,"results":[{"grader":"maxToolCalls 0","passed":false,"detail":"1 tool calls, more than the limit of 0"}]}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("json.Marshal(TrialGrade) (-want +got):\n%s", diff)
	}
}

func TestParseAll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		specs   []string
		names   []string
		wantErr string
	}{
		{"none", nil, []string{}, ""},
		{"two", []string{`{"toolCalled": "a"}`, `{"maxToolCalls": 2}`}, []string{"toolCalled a", "maxToolCalls 2"}, ""},
		{"bad third", []string{`{"toolCalled": "a"}`, `{"maxToolCalls": 2}`, `{"tooCalled": "b"}`}, nil,
			`[2]: unknown grader "tooCalled" (did you mean toolCalled?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var specs []json.RawMessage
			for _, s := range tt.specs {
				specs = append(specs, json.RawMessage(s))
			}
			gs, err := ParseAll(specs)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseAll(%v) error = %v, want %q", tt.specs, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAll(%v) = %v", tt.specs, err)
			}
			names := []string{}
			for _, g := range gs {
				names = append(names, g.Name())
			}
			if diff := cmp.Diff(tt.names, names); diff != "" {
				t.Errorf("ParseAll(%v) names (-want +got):\n%s", tt.specs, diff)
			}
		})
	}
}

// TestTrialEveryOutcome runs every outcome against every kind of grader,
// each once with a spec the transcript satisfies and once with one it does
// not. Only an answered trial can pass; no-answer and timed-out trials are
// graded, keep their results and fail with a reason; the rest are not
// graded. The transcripts all hold an answer and a tool call, so a trial
// that passes does so only because of its status.
func TestTrialEveryOutcome(t *testing.T) {
	t.Parallel()
	outcomes := []transcript.Outcome{
		{Status: transcript.Answered},
		{Status: transcript.NoAnswer},
		{Status: transcript.TimedOut},
		{Status: transcript.Errored, Cause: transcript.CauseClient},
		{Status: transcript.Errored, Cause: transcript.CauseServer},
		{Status: transcript.Errored, Cause: transcript.CauseProvider},
		{Status: transcript.Errored, Cause: transcript.CauseRunner},
		{Status: transcript.Errored},
		{Status: transcript.Cancelled},
		{Status: transcript.Skipped},
		{Status: "exploded"},
		{Status: ""},
	}
	kinds := []struct {
		kind       string
		pass, fail string // specs; empty for no grader at all
	}{
		{"answerContains", `{"answerContains": "12°C"}`, `{"answerContains": "Bergen"}`},
		{"answerMatches", `{"answerMatches": "\\d+°C"}`, `{"answerMatches": "^Bergen"}`},
		{"toolCalled", `{"toolCalled": {"tool": "get_forecast", "arguments": {"city": "Oslo"}}}`, `{"toolCalled": "get_alerts"}`},
		{"toolNotCalled", `{"toolNotCalled": "delete_file"}`, `{"toolNotCalled": "get_forecast"}`},
		{"maxToolCalls", `{"maxToolCalls": 1}`, `{"maxToolCalls": 0}`},
		{"none", "", ""},
	}
	for _, o := range outcomes {
		for _, k := range kinds {
			for _, satisfied := range []bool{true, false} {
				spec := k.pass
				if !satisfied {
					spec = k.fail
				}
				if k.kind == "none" && !satisfied {
					continue
				}
				name := fmt.Sprintf("%s(%s)/%s/satisfied=%t", o.Status, o.Cause, k.kind, satisfied)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					tr := &transcript.Transcript{
						Key:       transcript.Key{Case: "oslo", Variant: "v", Trial: 1},
						Answer:    "It will be 12°C in Oslo.",
						ToolCalls: []transcript.ToolCall{call("weather", "get_forecast", `{"city":"Oslo"}`)},
						Outcome:   o,
					}
					var gs []Grader
					if spec != "" {
						gs = append(gs, mustParse(t, spec))
					}
					got := Trial(tr, gs)
					switch o.Status {
					case transcript.Answered:
						if !got.Graded || got.Passed != satisfied || got.Failed != "" || len(got.Results) != len(gs) {
							t.Errorf("Trial(answered, %s) = %+v, want graded, passed %t, %d results, no Failed", spec, got, satisfied, len(gs))
						}
					case transcript.NoAnswer, transcript.TimedOut:
						if !got.Graded || got.Passed {
							t.Errorf("Trial(%s, %s) = %+v, want graded and failed", o.Status, spec, got)
						}
						if len(got.Results) != len(gs) || (len(gs) == 1 && got.Results[0].Passed != gs[0].Grade(tr).Passed) {
							t.Errorf("Trial(%s, %s).Results = %+v, want the grader's own result kept", o.Status, spec, got.Results)
						}
						if !strings.Contains(got.Failed, o.Status) || !strings.Contains(got.Failed, "only an answered trial can pass") {
							t.Errorf("Trial(%s, %s).Failed = %q, want the status and the rule", o.Status, spec, got.Failed)
						}
					default:
						if got.Graded || got.Passed || got.Results != nil || got.Failed != "" {
							t.Errorf("Trial(%q, %s) = %+v, want not graded, no results", o.Status, spec, got)
						}
					}
					if got.Trial.Status != o.Status || got.Trial.Cause != o.Cause {
						t.Errorf("Trial(%q).Trial = %+v, want the transcript's status and cause", o.Status, got.Trial)
					}
				})
			}
		}
	}
}

// TestRefusedCalls pins what toolCalled and toolNotCalled make of a call the
// client asked for that no server got (a tool the variant hides): it is not
// a call, whichever client ran the trial, and the detail says it was asked.
func TestRefusedCalls(t *testing.T) {
	t.Parallel()
	tr := answered("done", call("notes", "read_note", `{}`))
	tr.Discrepancies = []transcript.Discrepancy{{Kind: transcript.Unconfirmed, Tool: "delete_note", Call: "c9"}}
	called := mustParse(t, `{"toolCalled": "delete_note"}`).Grade(tr)
	if called.Passed || !strings.Contains(called.Detail, "no server got") {
		t.Errorf("toolCalled delete_note = %+v, want a failure that says no server got the call", called)
	}
	notCalled := mustParse(t, `{"toolNotCalled": "delete_note"}`).Grade(tr)
	if !notCalled.Passed || !strings.Contains(notCalled.Detail, "asked for once") {
		t.Errorf("toolNotCalled delete_note = %+v, want a pass that says it was asked for once", notCalled)
	}
}
