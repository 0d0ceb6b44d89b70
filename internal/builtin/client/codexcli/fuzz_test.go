package codexcli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzParser feeds the parser any bytes as the output of codex exec
// --json, one line per "\n": it never panics, and what it makes can be
// stored as a transcript (it encodes as JSON). The seeds in
// testdata/fuzz/FuzzParser are the streams of the parser's tests.
func FuzzParser(f *testing.F) {
	f.Add([]byte(`{"type":"thread.started","thread_id":"t1"}`+"\n"+
		`{"type":"item.started","item":{"id":"i1","type":"mcp_tool_call","server":"s","tool":"echo","arguments":{"text":"hi"},"status":"in_progress"}}`+"\n"+
		`{"type":"item.completed","item":{"id":"i1","type":"mcp_tool_call","server":"s","tool":"echo","arguments":{"text":"hi"},"result":{"content":[{"type":"text","text":"hi"}]},"status":"completed"}}`+"\n"+
		`{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"hi"}}`+"\n"+
		`{"type":"turn.completed","usage":{"input_tokens":3,"cached_input_tokens":1,"output_tokens":2}}`), 0)
	f.Add([]byte(`{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}`+"\n"+
		`{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"ls","aggregated_output":"x\n","exit_code":1,"status":"failed"}}`+"\n"+
		`{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"a","kind":"add"}],"status":"completed"}}`+"\n"+
		`{"type":"item.completed","item":{"id":"i3","type":"web_search","query":"q"}}`), 1)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, out []byte, maxActions int) {
		p := newParser("the prompt", maxActions%4)
		p.maxReconnects = 2
		for i, l := range bytes.Split(out, []byte("\n")) {
			p.line(l, t0.Add(time.Duration(i)*time.Millisecond))
		}
		res := p.result()
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("the result of %q does not encode: %v", out, err)
		}
	})
}
