package run_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/transcript"
)

// TestProgressEscapesNames follows a run whose id, case ids, variant names
// and causes hold what a terminal acts on: the progress prints none of it,
// only its own "\r ESC[K" redraws on a terminal.
func TestProgressEscapesNames(t *testing.T) {
	t.Parallel()
	bad := []string{"\x1b[2J\x1b[H", "\x1b]0;title\x07", "tab\t", "new\nline", "\u009b2J", "\u202e", "\xff"}
	for _, terminal := range []bool{false, true} {
		var out bytes.Buffer
		p := run.NewProgress(&out, terminal)
		p.Start(transcript.Run{ID: "run" + bad[0], Variants: []string{"v"}, Cases: len(bad), Trials: 1}, len(bad))
		for i, b := range bad {
			p.Trial(report.Trial{
				Key:    transcript.Key{Case: "c" + b, Variant: "v" + bad[(i+1)%len(bad)], Trial: 1},
				Status: transcript.Errored, Cause: "cause" + b,
			})
		}
		p.Finish()
		text := strings.ReplaceAll(out.String(), "\r\x1b[K", "")
		for i, line := range strings.Split(text, "\n") {
			if j := strings.IndexFunc(line, func(r rune) bool {
				return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\ufffd'
			}); j >= 0 {
				t.Errorf("terminal %v: line %d holds %q: %q", terminal, i+1, []rune(line[j:])[0], line)
			}
		}
		if !terminal && !strings.Contains(text, `v\x1b]0;title\x07/c\x1b[2J\x1b[H#1 errored (cause\x1b[2J\x1b[H)`) {
			t.Errorf("the errored trial's line is not there, escaped:\n%s", text)
		}
	}
}
