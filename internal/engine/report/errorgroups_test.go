package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// failed makes a trial that was not graded: errored or skipped, with a
// cause and a message.
func failed(c, v string, n int, status, cause, detail string) Trial {
	t := tr(c, v, n, status, false)
	t.Cause, t.Detail = cause, detail
	return t
}

func TestErrorGroups(t *testing.T) {
	t.Parallel()
	const e, s = transcript.Errored, transcript.Skipped
	in := Input{
		Run:      transcript.Run{ID: "r", Trials: 3},
		Variants: []VariantInfo{{Name: "a"}, {Name: "b"}},
		Cases:    []string{"x", "y", "z"},
		// In no particular order: groups follow the plan, not the input.
		Trials: []Trial{
			failed("y", "a", 1, e, "provider", "429 Too Many Requests"),
			failed("x", "a", 3, e, "provider", "401 Unauthorized: no key\x1b[31m\r"),
			failed("x", "a", 2, e, "provider", ""),
			failed("z", "a", 1, s, "provider", "variant stopped: its first trials all errored (provider)"),
			failed("z", "a", 2, s, "provider", "variant stopped: its first trials all errored (provider)"),
			failed("x", "a", 1, e, "server", "weather: exited with status 2"),
			failed("y", "a", 2, e, "", "no cause given"),
			failed("y", "a", 3, e, "weird", ""),
			failed("z", "a", 3, s, "", ""),
			tr("x", "b", 1, transcript.Answered, true),
			failed("x", "b", 2, transcript.Cancelled, "", "interrupted"),
			// Case y of b is incomplete (one trial): its errors still count.
			failed("y", "b", 1, e, "client", "claude: not logged in"),
		},
	}
	r := Build(in)
	key := func(c, v string, n int) transcript.Key { return transcript.Key{Case: c, Variant: v, Trial: n} }
	wantA := []ErrorGroup{
		{Status: e, Cause: "server", Count: 1, First: key("x", "a", 1), Detail: "weather: exited with status 2"},
		// x#2 comes first but has no message: the group shows x#3's.
		{Status: e, Cause: "provider", Count: 3, First: key("x", "a", 3), Detail: "401 Unauthorized: no key\x1b[31m\r"},
		{Status: e, Count: 1, First: key("y", "a", 2), Detail: "no cause given"},
		{Status: e, Cause: "weird", Count: 1, First: key("y", "a", 3)},
		{Status: s, Cause: "provider", Count: 2, First: key("z", "a", 1), Detail: "variant stopped: its first trials all errored (provider)"},
		{Status: s, Count: 1, First: key("z", "a", 3)},
	}
	if diff := cmp.Diff(wantA, r.Variants[0].ErrorGroups); diff != "" {
		t.Errorf("Build: variant a's error groups (-want +got):\n%s", diff)
	}
	wantB := []ErrorGroup{{Status: e, Cause: "client", Count: 1, First: key("y", "b", 1), Detail: "claude: not logged in"}}
	if diff := cmp.Diff(wantB, r.Variants[1].ErrorGroups); diff != "" {
		t.Errorf("Build: variant b's error groups (-want +got):\n%s", diff)
	}
	if got, want := r.Variants[0].Outcomes, (Outcomes{Errored: 6, Skipped: 3}); got != want {
		t.Errorf("Build: variant a's outcomes = %+v, want %+v", got, want)
	}
	if r.Counts.Skipped != 3 || r.Variants[0].Graded != 0 || r.Variants[0].PassRate != nil {
		t.Errorf("Build: %d skipped, variant a graded %d, pass rate %v; want 3 skipped and nothing graded", r.Counts.Skipped, r.Variants[0].Graded, show(r.Variants[0].PassRate))
	}

	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"ERRORED  CANCELLED  SKIPPED  MISSING",
		"\nNot graded:\n" +
			"  a  1 errored (server)    first x #1: \"weather: exited with status 2\"\n" +
			"  a  3 errored (provider)  first x #3: \"401 Unauthorized: no key\\x1b[31m\\r\"\n" +
			"  a  1 errored (no cause)  first y #2: \"no cause given\"\n" +
			"  a  1 errored (weird)     first y #3: no message\n" +
			"  a  2 skipped (provider)  first z #1: \"variant stopped: its first trials all errored (provider)\"\n" +
			"  a  1 skipped             first z #3: no message\n" +
			"  b  1 errored (client)    first y #1: \"claude: not logged in\"\n\n",
		"Outcomes  1 answered, 7 errored, 1 cancelled, 3 skipped, 6 missing\n",
		"Note: 11 trials errored, cancelled or skipped: not counted as passes or failures\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteText lacks\n%s\nin\n%s", want, out)
		}
	}
	// No control character of a message reaches the terminal.
	for _, r := range out {
		if r < 0x20 && r != '\n' || r == 0x7f {
			t.Errorf("WriteText wrote the control character %U:\n%q", r, out)
		}
	}
	// With no skipped trial there is no SKIPPED column.
	buf.Reset()
	if err := Build(fixture()).WriteText(&buf); err != nil || strings.Contains(buf.String(), "SKIPPED") {
		t.Errorf("WriteText(fixture) = %v, shows a SKIPPED column with nothing skipped:\n%s", err, buf.String())
	}
}

// TestNewTrialDetail: the message a report shows of a trial is the first
// line of its outcome's detail, at most 300 bytes, cut between characters.
func TestNewTrialDetail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) // 400 bytes
	tests := []struct{ detail, want string }{
		{"", ""},
		{"provider: 401 Unauthorized", "provider: 401 Unauthorized"},
		{"first line\nsecond line\n", "first line"},
		{"\n  \r\n  indented first  \r\nsecond", "indented first"},
		{"x" + long, "x" + strings.Repeat("é", 148) + "…"}, // 297 bytes and "…"
		{long, strings.Repeat("é", 148) + "…"},             // byte 297 is inside an é
	}
	for _, tt := range tests {
		tx := &transcript.Transcript{
			Key:     transcript.Key{Case: "c", Variant: "v", Trial: 1},
			Outcome: transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseProvider, Detail: tt.detail},
		}
		got := NewTrial(grade.Trial(tx, nil)).Detail
		if got != tt.want {
			t.Errorf("NewTrial(detail %.40q…).Detail = %q, want %q", tt.detail, got, tt.want)
		}
		if len(got) > 300 || !utf8.ValidString(got) {
			t.Errorf("NewTrial(detail %.40q…).Detail is %d bytes, valid UTF-8 %v; want at most 300 and valid", tt.detail, len(got), utf8.ValidString(got))
		}
	}
}
