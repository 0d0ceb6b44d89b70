package claudecode

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// FuzzParse feeds parse any bytes as the CLI's stream-json output, one
// line per "\n": it never panics, and what it makes can be stored as a
// transcript (it encodes as JSON). The seeds in testdata/fuzz/FuzzParse
// are the streams of the parser's tests.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"type":"system","subtype":"init","session_id":"s1","tools":["mcp__my__ping"]}` + "\n" +
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"mcp__my__ping","input":{}}]}}` + "\n" +
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"pong"}]}}` + "\n" +
		`{"type":"result","subtype":"success","result":"ok","usage":{"input_tokens":1}}`))
	srvs := []servers.Server{{Name: "my server", Command: "x"}, {Name: "my", Command: "y"}}
	infos := []transcript.ServerInfo{{Name: "my server", Tools: []string{"do it"}}, {Name: "my"}}
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, out []byte) {
		var ls []line
		for i, text := range bytes.Split(out, []byte("\n")) {
			ls = append(ls, line{at: t0.Add(time.Duration(i) * time.Millisecond), text: text})
		}
		res := parse(ls, "the prompt", srvs, infos)
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("the result of %q does not encode: %v", out, err)
		}
	})
}
