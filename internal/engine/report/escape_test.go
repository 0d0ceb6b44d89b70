package report_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

// hostile are names a dataset or config may hold that a terminal would
// act on: escapes that clear the screen, move the cursor or set the
// title, bells, tabs and newlines that break the table, C1 controls,
// marks that reorder text, and bytes that are not UTF-8.
var hostile = []string{
	"\x1b[2J\x1b[H", "ti\x1b]0;pwned\x07tle", "tab\there", "new\nline", "cr\rreturn",
	"c1\u009b2J", "rtl\u202eevil", "bad\xff\xfe", "bell\x07", "del\x7f",
}

// TestWriteTextEscapesNames writes the report of a run whose eval, run
// id, variants, clients, models, case ids and outcome causes are all
// hostile: the text holds no character a terminal acts on but the
// newlines that end its lines.
func TestWriteTextEscapesNames(t *testing.T) {
	t.Parallel()
	var variants []report.VariantInfo
	var names []string
	for i, h := range hostile[:4] {
		v := report.VariantInfo{Name: "v" + h, Client: "c" + h, Model: "m" + hostile[len(hostile)-1-i]}
		variants = append(variants, v)
		names = append(names, v.Name)
	}
	in := report.Input{
		Run: transcript.Run{
			ID: "run" + hostile[0], Eval: "eval" + hostile[1], Collect: transcript.CollectPartial,
			Variants: names, Cases: len(hostile), Trials: 2,
		},
		Variants: variants,
		Cases:    hostile,
	}
	for ci, c := range hostile {
		for vi, v := range names {
			for n := 1; n <= 2; n++ {
				tr := report.Trial{Key: transcript.Key{Case: c, Variant: v, Trial: n}, Status: transcript.Answered, Graded: true, Passed: (ci+vi+n)%2 == 0}
				if ci == vi {
					tr = report.Trial{Key: tr.Key, Status: transcript.Errored, Cause: "cause" + hostile[(ci+1)%len(hostile)], Detail: "detail" + c}
				}
				in.Trials = append(in.Trials, tr)
			}
		}
	}
	var out bytes.Buffer
	if err := report.Build(in).WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !utf8.ValidString(text) {
		t.Errorf("the report is not UTF-8:\n%q", text)
	}
	for i, line := range strings.Split(text, "\n") {
		if j := strings.IndexFunc(line, func(r rune) bool {
			return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
		}); j >= 0 {
			t.Errorf("line %d holds %q: %q", i+1, []rune(line[j:])[0], line)
		}
	}
	for _, want := range []string{`v\x1b[2J\x1b[H`, `tab\there`, `rtl\u202eevil`, `bad\xff\xfe`} {
		if !strings.Contains(text, want) {
			t.Errorf("the report does not show %s:\n%s", want, text)
		}
	}
}
