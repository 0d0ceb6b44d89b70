package msgblocks

import (
	"encoding/json"
	"testing"
)

func TestContent(t *testing.T) {
	var m struct{ Content Content }
	if err := json.Unmarshal([]byte(`{"content": "héllo ✓"}`), &m); err != nil || len(m.Content) != 1 || m.Content[0].Text != "héllo ✓" {
		t.Fatalf("a string: %+v, %v", m.Content, err)
	}
	raw := `{"content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": "t1", "name": "echo", "input": {"x": 1}},
		{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "one"}, {"type": "image"}, {"type": "text", "text": "two"}], "is_error": true}]}`
	if err := json.Unmarshal([]byte(raw), &m); err != nil || len(m.Content) != 3 || m.Content[1].Name != "echo" || !m.Content[2].IsError {
		t.Fatalf("blocks: %+v, %v", m.Content, err)
	}
	if got := ResultText(m.Content[2].Content); got != "one\n[image]\ntwo" {
		t.Errorf("ResultText of blocks = %q", got)
	}
	for in, want := range map[string]string{`"plain"`: "plain", ``: "", `{"odd": 1}`: `{"odd": 1}`} {
		if got := ResultText(json.RawMessage(in)); got != want {
			t.Errorf("ResultText(%s) = %q, want %q", in, got, want)
		}
	}
	if err := json.Unmarshal([]byte(`{"content": 7}`), &m); err == nil {
		t.Error("a number decoded as content")
	}
}
