package run_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/transcript"
)

// TestProgressFitsWidth follows runs of every size on terminals of every
// width from 10 to 130 columns: each redraw of the live line is shorter
// than the terminal (so it never wraps and the next redraw overwrites it
// whole), and a wide terminal gets the whole line with its time left.
func TestProgressFitsWidth(t *testing.T) {
	t.Parallel()
	for _, total := range []int{1, 40, 12345} {
		for width := 10; width <= 130; width += 3 {
			var out bytes.Buffer
			w := width
			p := run.NewProgressWidth(&out, true, func() int { return w })
			p.Start(transcript.Run{ID: "quickstart-20261207-221427-dbbc70", Variants: []string{"v"}, Cases: total, Trials: 1}, total)
			// The run's first line wraps within the width (a word longer
			// than the width, the run's id, stands alone).
			for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				if n := utf8.RuneCountInString(l); n > width && len(strings.Fields(l)) > 1 {
					t.Errorf("total %d, width %d: the run's first line has a line of %d characters: %q", total, width, n, l)
				}
			}
			for i := range min(total, 50) {
				st := transcript.Answered
				if i%7 == 3 {
					st = transcript.Errored
				}
				p.Trial(report.Trial{Key: transcript.Key{Case: "c", Variant: "v", Trial: i + 1}, Status: st, Graded: st == transcript.Answered, Passed: i%2 == 0})
			}
			p.Finish()
			lines := strings.Split(out.String(), "\n")
			final := lines[len(lines)-2] // the last line ends with a newline
			parts := strings.Split(final, "\r\x1b[K")
			last := parts[len(parts)-1]
			if n := utf8.RuneCountInString(last); n >= width {
				t.Errorf("total %d, width %d: final line of %d characters: %q", total, width, n, last)
			}
			if width >= 90 && !strings.Contains(last, "elapsed") {
				t.Errorf("total %d, width %d: a wide terminal got the short line %q", total, width, last)
			}
			if width >= 40 && !strings.Contains(last, "eta ") {
				t.Errorf("total %d, width %d: no time left in %q", total, width, last)
			}
		}
	}
}
