package shard_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// docVerdict is one row of the table in docs/protocol.md's "Liveness and
// errors".
type docVerdict struct {
	what, returns, recorded string
}

// readVerdicts reads that table.
func readVerdicts(t *testing.T) []docVerdict {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n## Liveness and errors\n")
	if !ok {
		t.Fatal(`docs/protocol.md has no "## Liveness and errors" section`)
	}
	var rows []docVerdict
	inTable := false
	for line := range strings.SplitSeq(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("docs/protocol.md: the verdict table's row %q has %d cells, want 3", line, len(cells))
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "What happened" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, docVerdict{cells[0], cells[1], cells[2]})
	}
	if len(rows) == 0 {
		t.Fatal("docs/protocol.md: the verdict table has no rows")
	}
	return rows
}

// TestVerdictsAsDocumented plays each row of the verdict table in
// docs/protocol.md against Serve: what it returns (no error, or an error
// holding each quoted piece of the row) and how run.json records it (done,
// lost when the error wraps ErrWorkerLost, failed otherwise). A row
// without a script here, or a script without a row, fails the test, so
// the doc and the code cannot drift apart.
func TestVerdictsAsDocumented(t *testing.T) {
	t.Parallel()
	hello := `{"type":"hello","protocol":"mst.shard/v1","mstVersion":"test","shard":0,"os":"linux","arch":"amd64"}`
	acquire := `{"type":"acquire","id":1,"key":{"case":"a","variant":"v","trial":1}}`
	done := `{"type":"done","counts":{"planned":1,"missing":1},"cleanupOk":true}`
	// Each row's scripts: every one must end as the row says. A script
	// sends lines; "" closes the worker's stdout, "broken" breaks it with
	// an error, "silence" lets 61 s pass.
	scripts := map[string][][]string{
		"The worker sent `done`":    {{hello, done}},
		"`done` carried an `error`": {{hello, `{"type":"done","error":"readiness check failed"}`}},
		"hello with another protocol or MST version": {
			{`{"type":"hello","protocol":"mst.shard/v1","mstVersion":"other","shard":0}`},
			{`{"type":"hello","protocol":"mst.shard/v2","mstVersion":"test","shard":0}`},
		},
		"hello from a machine the run's clients cannot use (`Coordinator.CheckHello`)": {
			{strings.Replace(hello, `"linux"`, `"plan9"`, 1), done},
		},
		"acquire before hello":      {{acquire}},
		"acquire-call before hello": {{`{"type":"acquire-call","id":1,"server":"weather"}`}},
		"A line that is not JSON, is cut off, has a field of the wrong JSON type, or is longer than 16 MiB": {
			{hello, "Downloading the server..."},
			{hello, `{"type":"acquire","id":1,"key":{"ca`},
			{hello, `{"type":"acquire","id":"seven"}`},
			{hello, `{"type":"heartbeat","inFlight":"` + strings.Repeat("x", 16<<20) + `"}`},
		},
		"A line with a type mst.shard/v1 does not have": {{hello, `{"type":"teleport"}`}},
		"A message the coordinator refuses (see [Refused messages](#refused-messages)), then `done`": {
			{hello, `{"type":"trial","acquire":9,"key":{"case":"a","variant":"v","trial":1},"status":"answered","path":"transcripts/v/a.t1.json"}`, done},
			{hello, `{"type":"acquire","id":1,"key":{"case":"elsewhere","variant":"v","trial":1}}`, done},
			{hello, acquire, `{"type":"trial","acquire":1,"key":{"case":"a","variant":"v","trial":1},"status":"answered","path":"../../x.json"}`, done},
			{hello, hello, done},
			{hello, `{"type":"acquire-call","id":1,"server":"elsewhere"}`, done},
			{hello, `{"type":"release-call","id":7}`, done},
			{hello, `{"type":"acquire-call","id":0,"server":"weather"}`, `{"type":"acquire-call","id":1,"server":"weather"}`, `{"type":"release-call","id":1}`, `{"type":"release-call","id":1}`, done},
		},
		"Nothing from the worker for 60 s (`Coordinator.Silence`)": {{hello, "silence"}},
		"The worker's stdout ended before `done`":                  {{hello, ""}},
		"Reading the worker's stdout failed (a broken channel)":    {{hello, "broken"}},
	}
	b := &shard.Bundle{Series: shard.SeriesOf(shard.Planned{Key: transcript.Key{Case: "a", Variant: "v", Trial: 1}}),
		Settings: []shard.Setting{{Variant: "v", Servers: []servers.Server{{Name: "weather", Command: "weather"}}}}}
	rows := readVerdicts(t)
	seen := map[string]bool{}
	for _, row := range rows {
		seen[row.what] = true
		runs, ok := scripts[row.what]
		if !ok {
			t.Errorf("docs/protocol.md lists %q, which TestVerdictsAsDocumented has no script for", row.what)
			continue
		}
		for _, script := range runs {
			var err error
			synctest.Test(t, func(t *testing.T) {
				c := &shard.Coordinator{MSTVersion: "test", Logger: discardLogger(), Bundles: []*shard.Bundle{b},
					CheckHello: func(_ *shard.Bundle, h *protocol.Hello) error {
						if h.OS != "linux" {
							return errors.New("client fake runs on linux")
						}
						return nil
					}}
				w := startServe(t, t.Context(), c, 0, nil)
				for _, line := range script {
					if w.returned() {
						break
					}
					switch line {
					case "":
						w.closeStdout()
					case "broken":
						w.stdout.CloseWithError(errors.New("connection reset by peer"))
					case "silence":
						time.Sleep(61 * time.Second)
					default:
						w.send(line)
					}
					synctest.Wait()
				}
				_, err = w.wait()
			})
			got := "done"
			switch {
			case errors.Is(err, shard.ErrWorkerLost):
				got = "lost"
			case err != nil:
				got = "failed"
			}
			where := clipScript(script)
			if got != row.recorded {
				t.Errorf("%s: Serve(%s) = %v, recorded as %s; docs/protocol.md says %s", row.what, where, err, got, row.recorded)
			}
			if row.returns == "no error" && err != nil {
				t.Errorf("%s: Serve(%s) = %v; docs/protocol.md says no error", row.what, where, err)
			}
			for _, piece := range quoted(row.returns) {
				if piece == "cancel" {
					continue // what was sent, not what Serve returns
				}
				if err == nil || !strings.Contains(err.Error(), piece) {
					t.Errorf("%s: Serve(%s) = %v; docs/protocol.md says it holds %q", row.what, where, err, piece)
				}
			}
		}
	}
	for what := range scripts {
		if !seen[what] {
			t.Errorf("TestVerdictsAsDocumented has a script for %q, which docs/protocol.md's verdict table does not list", what)
		}
	}
}

// quoted returns the pieces of the backquoted parts of s, split at "…".
func quoted(s string) []string {
	var out []string
	parts := strings.Split(s, "`")
	for i := 1; i < len(parts); i += 2 {
		for p := range strings.SplitSeq(parts[i], "…") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func clipScript(script []string) string {
	var b strings.Builder
	for i, l := range script {
		if i > 0 {
			b.WriteString(", ")
		}
		if len(l) > 60 {
			l = l[:60] + "…"
		}
		b.WriteString(l)
	}
	return b.String()
}
