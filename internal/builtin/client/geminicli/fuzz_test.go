package geminicli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/mst-eval/mst/servers"
)

// FuzzParser feeds the parser any bytes as the output of gemini
// --output-format stream-json, one line per "\n": it never panics, and
// what it makes can be stored as a transcript (it encodes as JSON). The
// seeds in testdata/fuzz/FuzzParser are the streams of the parser's tests.
func FuzzParser(f *testing.F) {
	f.Add([]byte(`{"type":"init","session_id":"s1","model":"m"}`+"\n"+
		`{"type":"message","role":"assistant","content":"Let me ","delta":true}`+"\n"+
		`{"type":"tool_use","tool_name":"mcp_everything_get-sum","tool_id":"c1","parameters":{"a":1,"b":2}}`+"\n"+
		`{"type":"tool_result","tool_id":"c1","status":"success","output":"3"}`+"\n"+
		`{"type":"result","status":"success","stats":{"input_tokens":20,"output_tokens":7,"cached":4,"duration_ms":12}}`), 0)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, out []byte, maxActions int) {
		p := newParser("the prompt", maxActions%4, newToolNamer([]servers.Server{{Name: "everything"}, {Name: "every"}}))
		for i, l := range bytes.Split(out, []byte("\n")) {
			p.line(l, t0.Add(time.Duration(i)*time.Millisecond))
		}
		res := p.result()
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("the result of %q does not encode: %v", out, err)
		}
	})
}
