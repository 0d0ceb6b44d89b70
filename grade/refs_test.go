package grade

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/transcript"
)

func TestRefs(t *testing.T) {
	t.Parallel()
	specs := []string{
		`{"answerContains": "x"}`, `{"answerMatches": "x"}`, `{"maxToolCalls": 2}`,
		`{"toolCalled": "echo"}`,
		`{"toolCalled": {"tool": "get_forecast", "server": "weather", "arguments": {"city": "Oslo"}}}`,
		`{"toolNotCalled": "delete_file"}`,
		`{"toolNotCalled": {"tool": "rm", "server": "fs"}}`,
	}
	var gs []Grader
	for _, s := range specs {
		gs = append(gs, mustParse(t, s))
	}
	want := []Ref{
		{Grader: "toolCalled", Tool: "echo"},
		{Grader: "toolCalled", Server: "weather", Tool: "get_forecast"},
		{Grader: "toolNotCalled", Tool: "delete_file"},
		{Grader: "toolNotCalled", Server: "fs", Tool: "rm"},
	}
	if diff := cmp.Diff(want, Refs(gs)); diff != "" {
		t.Errorf("Refs(%d graders) (-want +got):\n%s", len(gs), diff)
	}
}

func TestCheckRefs(t *testing.T) {
	t.Parallel()
	have := []ServerTools{
		{Server: "fs", Tools: []string{"read_file", "write_file", "delete_file"}},
		{Server: "weather", Tools: []string{"get_forecast", "météo_prévision"}},
	}
	ref := func(kind, server, tool string) PlacedRef {
		return PlacedRef{At: "graders[1]", Ref: Ref{Grader: kind, Server: server, Tool: tool}}
	}
	tests := []struct {
		name string
		refs []PlacedRef
		want []string // lines of the error; none: no error
	}{
		{"none", nil, nil},
		{"known tools", []PlacedRef{ref("toolCalled", "", "read_file"), ref("toolNotCalled", "fs", "delete_file"), ref("toolCalled", "weather", "météo_prévision")}, nil},
		{"typo", []PlacedRef{ref("toolNotCalled", "", "delte_file")},
			[]string{`graders[1] toolNotCalled "delte_file": no server of variant v offers a tool delte_file (did you mean delete_file?)`}},
		{"nothing close", []PlacedRef{ref("toolCalled", "", "launch_rocket")},
			[]string{`graders[1] toolCalled "launch_rocket": no server of variant v offers a tool launch_rocket (known: delete_file, get_forecast, météo_prévision, read_file, write_file)`}},
		{"unknown server", []PlacedRef{ref("toolCalled", "wether", "get_forecast")},
			[]string{`graders[1] toolCalled "get_forecast": variant v has no server wether (did you mean weather?)`}},
		{"tool on another server", []PlacedRef{ref("toolCalled", "fs", "get_forecast")},
			[]string{`graders[1] toolCalled "get_forecast": server fs of variant v offers no tool get_forecast (server weather has it)`}},
		{"typo on a server", []PlacedRef{ref("toolCalled", "fs", "raed_file")},
			[]string{`graders[1] toolCalled "raed_file": server fs of variant v offers no tool raed_file (did you mean read_file?)`}},
		{"client's name for the tool", []PlacedRef{ref("toolCalled", "", "mcp__fs__write_file"), ref("toolCalled", "", "weather__m_t_o_pr_vision")},
			[]string{
				`graders[1] toolCalled "mcp__fs__write_file": no server of variant v offers a tool mcp__fs__write_file (did you mean write_file? name a tool as its server lists it)`,
				`graders[1] toolCalled "weather__m_t_o_pr_vision": no server of variant v offers a tool weather__m_t_o_pr_vision (did you mean météo_prévision? name a tool as its server lists it)`,
			}},
		{"each bad ref once", []PlacedRef{ref("toolCalled", "", "x"), ref("toolCalled", "", "x"), {At: "graders[2]", Ref: Ref{Grader: "toolCalled", Tool: "x"}}},
			[]string{
				`graders[1] toolCalled "x": no server of variant v offers a tool x (known: delete_file, get_forecast, météo_prévision, read_file, write_file)`,
				`graders[2] toolCalled "x": no server of variant v offers a tool x (known: delete_file, get_forecast, météo_prévision, read_file, write_file)`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckRefs("v", tt.refs, have)
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CheckRefs(%v) (-want +got):\n%s", tt.refs, diff)
			}
		})
	}
}

// TestAnswerMatchesRedactedLabel: a pattern whose secret value was redacted
// ([redacted:NAME] in place of the value) matches the redacted answer, as
// the label itself, not as a character class.
func TestAnswerMatchesRedactedLabel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, answer string
		passed          bool
	}{
		{`token=[redacted:API_TOKEN] is`, "your token=[redacted:API_TOKEN] is set", true},
		{`^[redacted:API_TOKEN]$`, "[redacted:API_TOKEN]", true},
		{`^[redacted:API_TOKEN]$`, "r", false},
		{`^\[redacted:API_TOKEN\]$`, "[redacted:API_TOKEN]", true},
		{`^\[redacted:API_TOKEN]$`, "[redacted:API_TOKEN]", true},
		{`^[redacted:OTHER]$`, "[redacted:API_TOKEN]", false},
		{`[a-c]x`, "bx", true},
	}
	for _, tt := range tests {
		spec, _ := json.Marshal(map[string]string{"answerMatches": tt.pattern})
		g := mustParse(t, string(spec))
		tr := &transcript.Transcript{Answer: tt.answer, Outcome: transcript.Outcome{Status: transcript.Answered}}
		if got := g.Grade(tr).Passed; got != tt.passed {
			t.Errorf("answerMatches %s on %q: passed = %t, want %t", tt.pattern, tt.answer, got, tt.passed)
		}
	}
}
