package codexcli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
)

// A rollout like codex 0.171 writes it, cut to the lines the parser reads.
const rolloutSample = `{"timestamp":"2026-12-01T14:24:14.020Z","type":"session_meta","payload":{"id":"t1"}}
{"timestamp":"2026-12-01T14:24:14.100Z","type":"response_item","payload":{"type":"function_call","name":"echo","namespace":"mcp__my_server","arguments":"{\"text\":\"a\"}","call_id":"call_1"}}
{"timestamp":"2026-12-01T14:24:14.101Z","type":"token_usage_record","payload":{"response_id":"resp_1"}}
{"timestamp":"2026-12-01T14:24:14.102Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"McpToolCall","id":"call_1"}}}
{"timestamp":"2026-12-01T14:24:14.103Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"a"}]}}
{"timestamp":"2026-12-01T14:24:14.200Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"touch /x\"}","call_id":"call_2"}}
{"timestamp":"2026-12-01T14:24:14.201Z","type":"token_usage_record","payload":{"response_id":"resp_2"}}
{"timestamp":"2026-12-01T14:24:14.202Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_2","output":"Process exited with code 1\ntouch: cannot touch '/x': Read-only file system\n"}}
{"timestamp":"2026-12-01T14:24:14.300Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_3"}}
{"timestamp":"2026-12-01T14:24:14.301Z","type":"token_usage_record","payload":{"response_id":"resp_3"}}
{"timestamp":"2026-12-01T14:24:14.302Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"CommandExecution","id":"call_3"}}}
{"timestamp":"2026-12-01T14:24:14.303Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_3","output":"Process exited with code 0\nOutput:\nf\n"}}
not json
{"timestamp":"2026-12-01T14:24:14.400Z","type":"token_usage_record","payload":{"response_id":"resp_4"}}
`

// TestRolloutMerge: the rollout adds the call the event stream left out
// (a command the sandbox denied) in its place, as an error with what the
// CLI answered the model; a reported shell call takes the model's tool
// name and arguments; the model calls are counted.
func TestRolloutMerge(t *testing.T) {
	p := newParser("hi", 0)
	p.namespaces = namespaces([]servers.Server{{Name: "my-server"}})
	now := time.Now()
	for _, l := range []string{
		`{"type":"item.started","item":{"id":"item_1","type":"mcp_tool_call","server":"my-server","tool":"echo","arguments":{"text":"a"},"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"my-server","tool":"echo","arguments":{"text":"a"},"result":{"content":[{"type":"text","text":"a"}]},"status":"completed"}}`,
		`{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc ls","aggregated_output":"f\n","exit_code":0,"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"done"}}`,
	} {
		p.line([]byte(l), now)
	}
	p.readRollout([]byte(rolloutSample))
	res := p.result()
	var ids []string
	for _, c := range res.ToolCalls {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []string{"item_1", "call_2", "item_2"}) {
		t.Fatalf("calls %v, want the denied command between the two reported calls", ids)
	}
	denied, ls := res.ToolCalls[1], res.ToolCalls[2]
	if denied.Server != client.BuiltinServer || denied.Tool != "exec_command" || !denied.IsError || !strings.Contains(denied.Error, "Read-only file system") ||
		string(denied.Arguments) != `{"cmd":"touch /x"}` || denied.Started.IsZero() {
		t.Errorf("denied command = %+v", denied)
	}
	if ls.Tool != "exec_command" || string(ls.Arguments) != `{"cmd":"ls"}` || ls.Result != "f\n" || ls.IsError {
		t.Errorf("reported command = %+v (arguments %s)", ls, ls.Arguments)
	}
	if res.Usage.ModelCalls != 4 {
		t.Errorf("modelCalls = %d, want 4", res.Usage.ModelCalls)
	}
	// user, assistant(item_1), tool, assistant(call_2), tool, assistant(item_2), tool, assistant(done)
	var shape []string
	for _, m := range res.Messages {
		shape = append(shape, m.Role+":"+strings.Join(m.ToolCalls, ",")+m.ToolCall)
	}
	want := []string{"user:", "assistant:item_1", "tool:item_1", "assistant:call_2", "tool:call_2", "assistant:item_2", "tool:item_2", "assistant:"}
	if !slices.Equal(shape, want) {
		t.Errorf("messages %v, want %v", shape, want)
	}
}

// FuzzRollout feeds any bytes as the rollout after a stream: reading it
// never panics, and the result still encodes.
func FuzzRollout(f *testing.F) {
	f.Add([]byte(rolloutSample))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := newParser("hi", 0)
		p.line([]byte(`{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls","exit_code":0,"status":"completed"}}`), time.Now())
		p.readRollout(b)
		if _, err := json.Marshal(p.result()); err != nil {
			t.Fatal(err)
		}
	})
}
