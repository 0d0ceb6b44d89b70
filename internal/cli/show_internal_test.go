package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// TestShowEscapes prints a transcript whose every text holds what a
// terminal acts on (escapes, bells, C1 controls, reordering marks, bytes
// that are not UTF-8): the output holds none of it but its own newlines,
// and each text is still there, escaped.
func TestShowEscapes(t *testing.T) {
	t.Parallel()
	hostile := []string{"\x1b[2J\x1b[H", "\x1b]0;pwned\x07", "\u009b31m", "\u202eevil", "bad\xff", "tab\there", "cr\rhere", "del\x7f"}
	for _, h := range hostile {
		args, _ := json.Marshal(map[string]string{"text": h})
		tr := &transcript.Transcript{
			Run: "run" + h, Key: transcript.Key{Case: "case" + h, Variant: "v" + h, Trial: 1},
			Client: transcript.ClientInfo{Name: "api" + h, Version: "1" + h}, Model: "m" + h,
			Servers:  []transcript.ServerInfo{{Name: "s" + h, Transport: "stdio", Tools: []string{"t" + h}, ToolsHash: "h" + h, Implementation: "i" + h}},
			Prompt:   "line one " + h + "\nline two " + h,
			Messages: []transcript.Message{{Role: "user", Text: "ask " + h}, {Role: "assistant", Text: "sure " + h, ToolCalls: []string{"c1" + h, "gone" + h}}, {Role: "tool", ToolCall: "c1" + h, Text: "result " + h}},
			ToolCalls: []transcript.ToolCall{{ID: "c1" + h, Server: "s" + h, Tool: "t" + h, Arguments: args, Result: "result " + h, OfferedAs: "o" + h, Injected: "fault" + h, Evidence: "server"},
				{ID: "c2", Server: "s", Tool: "t", Error: "broke " + h}},
			Discrepancies: []transcript.Discrepancy{{Kind: "unreported", Server: "s" + h, Tool: "t" + h, Call: "c2", Detail: "d" + h}},
			Answer:        "answer " + h,
			Outcome:       transcript.Outcome{Status: transcript.Answered, Detail: "detail " + h},
			Environment:   transcript.Environment{Runner: "local" + h, OS: "linux", Arch: "amd64"},
		}
		g := &grade.TrialGrade{Key: tr.Key, Graded: true, Results: []grade.Result{{Grader: "g" + h, Detail: "why " + h}}, Failed: "f" + h}
		var out bytes.Buffer
		if err := writeTranscript(&out, tr, g); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		for i, line := range strings.Split(text, "\n") {
			if j := strings.IndexFunc(line, func(r rune) bool {
				return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\ufffd'
			}); j >= 0 {
				t.Errorf("%q: line %d holds %q: %q", h, i+1, []rune(line[j:])[0], line)
			}
		}
		esc := transcript.Printable(h)
		for _, want := range []string{"answer " + esc, "why " + esc, "broke " + esc, "line two " + esc, "fault" + esc, "d" + esc, "gone" + esc + " (not recorded)"} {
			if !strings.Contains(text, want) {
				t.Errorf("%q: the output lacks %q:\n%s", h, want, text)
			}
		}
	}
}
