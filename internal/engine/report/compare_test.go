package report_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/transcript"
)

// TestCompareRuns pairs runs whose cases flip from pass to fail in
// growing numbers: the paired numbers match the flips, Worse turns on
// exactly when the sign test is under 0.05, cases in one run only and
// variants in one run only are set apart.
func TestCompareRuns(t *testing.T) {
	t.Parallel()
	cases := []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"}
	base := report.Build(makeRun("base", []string{"a", "b"}, cases, 1, func(ci, vi, n int) int { return 0 }).in)
	for flips := 0; flips <= len(cases); flips++ {
		// Variant a loses `flips` cases; variant b gains nothing; the run
		// has a new case and no variant b2.
		in := makeRun("run", []string{"a", "b", "new"}, append(cases, "extra"), 1, func(ci, vi, n int) int {
			if vi == 0 && ci < flips {
				return 1 // failed
			}
			return 0
		}).in
		in.Run.Eval = base.Run.Eval
		c := report.CompareRuns(base, report.Build(in), report.ToolHashes{}, report.ToolHashes{})
		if len(c.Variants) != 2 || c.Variants[0].Variant != "a" || len(c.OnlyInRun) != 1 || c.OnlyInRun[0] != "new" {
			t.Fatalf("flips %d: variants %+v, only in run %v", flips, c.Variants, c.OnlyInRun)
		}
		a := c.Variants[0]
		if a.Paired.Cases != len(cases) || a.Paired.ABetter != flips || a.Paired.BBetter != 0 || len(a.Changed) != flips {
			t.Errorf("flips %d: paired %d cases, base better %d, run better %d, changed %d", flips, a.Paired.Cases, a.Paired.ABetter, a.Paired.BBetter, len(a.Changed))
		}
		wantWorse := flips > 0 && *a.Paired.SignTestP < 0.05
		if a.Worse != wantWorse || (flips >= 6) != a.Worse {
			t.Errorf("flips %d: worse %v, sign test p %v", flips, a.Worse, *a.Paired.SignTestP)
		}
		if c.Variants[1].Worse || len(c.Variants[1].Changed) != 0 {
			t.Errorf("flips %d: variant b changed: %+v", flips, c.Variants[1])
		}
		if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "1 case only in the run") {
			t.Errorf("flips %d: notes %q", flips, c.Notes)
		}
	}
}

// TestCompareToolChanges records tool hashes of two runs in every
// combination: a server's own list and each variant's offered list are
// reported changed only when both runs recorded hashes and they differ.
func TestCompareToolChanges(t *testing.T) {
	t.Parallel()
	rep := report.Build(makeRun("r", []string{"a", "b"}, []string{"c"}, 1, func(ci, vi, n int) int { return 0 }).in)
	tr := func(variant, server, offered, own string) *transcript.Transcript {
		return &transcript.Transcript{Key: transcript.Key{Case: "c", Variant: variant, Trial: 1},
			Servers: []transcript.ServerInfo{{Name: server, ToolsHash: offered, ServerToolsHash: own}}}
	}
	for _, tc := range []struct {
		name                string
		base, run           []*transcript.Transcript
		ownChanged, offered bool
		text                string
	}{
		{"same", []*transcript.Transcript{tr("a", "s", "o1", "h1")}, []*transcript.Transcript{tr("a", "s", "o1", "h1")}, false, false, "the server's own tool list is the same"},
		{"description changed", []*transcript.Transcript{tr("a", "s", "o1", "h1")}, []*transcript.Transcript{tr("a", "s", "o2", "h1")}, false, true, "the tools offered changed (o1 → o2)"},
		{"server changed", []*transcript.Transcript{tr("a", "s", "o1", "h1")}, []*transcript.Transcript{tr("a", "s", "o2", "h2")}, true, true, "the server's own tool list changed (h1 → h2)"},
		{"old transcripts", []*transcript.Transcript{tr("a", "s", "o1", "")}, []*transcript.Transcript{tr("a", "s", "o1", "h2")}, false, false, "not recorded in both runs"},
		{"changed within a run", []*transcript.Transcript{tr("a", "s", "o1", "h1"), tr("b", "s", "o3", "h1")}, []*transcript.Transcript{tr("a", "s", "o1", "h1"), tr("b", "s", "o3", "h1"), tr("a", "s", "o1", "h9")}, true, false, "(h1 → h1, h9)"},
	} {
		var bh, rh report.ToolHashes
		for _, x := range tc.base {
			bh.Add(x)
		}
		for _, x := range tc.run {
			rh.Add(x)
		}
		c := report.CompareRuns(rep, rep, bh, rh)
		if len(c.Servers) != 1 {
			t.Fatalf("%s: servers %+v", tc.name, c.Servers)
		}
		s := c.Servers[0]
		offered := false
		for _, o := range s.Offered {
			offered = offered || o.Changed
		}
		if s.ServerToolsChanged != tc.ownChanged || offered != tc.offered || c.ToolsChanged() != (tc.ownChanged || tc.offered) {
			t.Errorf("%s: own changed %v, offered changed %v; want %v, %v", tc.name, s.ServerToolsChanged, offered, tc.ownChanged, tc.offered)
		}
		var text, md bytes.Buffer
		c.WriteText(&text)
		c.WriteMarkdown(&md, report.Verdict{})
		if !strings.Contains(text.String(), tc.text) {
			t.Errorf("%s: text lacks %q:\n%s", tc.name, tc.text, text.String())
		}
		if !strings.Contains(md.String(), strings.NewReplacer("(", "(", "→", "→").Replace(tc.text)) {
			t.Errorf("%s: Markdown lacks %q:\n%s", tc.name, tc.text, md.String())
		}
	}
	_ = fmt.Sprint
}
