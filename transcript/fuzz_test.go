package transcript

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// checkDecodeError checks an error of Decode or DecodeRun: MST's words,
// with the error of encoding/json kept underneath.
func checkDecodeError(t *testing.T, err error) {
	de, ok := err.(*DecodeError)
	if !ok {
		t.Fatalf("error %v is %T, want *DecodeError", err, err)
	}
	if strings.TrimSpace(de.Msg) == "" || de.Err == nil {
		t.Fatalf("error without a message or its cause: %#v", de)
	}
	if strings.Contains(de.Msg, "invalid character") || strings.Contains(de.Msg, "looking for beginning") {
		t.Fatalf("a parser's words reach the user: %s", de.Msg)
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := json.Marshal(Transcript{Kind: "mst.transcript", Version: Version, Key: Key{Case: "c", Variant: "v", Trial: 1},
		Client: ClientInfo{Name: "codex"}, Messages: []Message{{Role: "user", Text: "hi"}},
		ToolCalls: []ToolCall{{ID: "1", Arguments: json.RawMessage(`{"a":1}`), Started: time.Unix(0, 0).UTC()}},
		Outcome:   Outcome{Status: Answered}, ClientTelemetry: map[string]any{"surface": "codex"}})
	for _, s := range []string{string(good), `{"kind": "mst.trace"}`, `{"trial": "one"}`, `{"timing": {"started": "yesterday"}}`, `{"toolCalls": [{"arguments": }]}`, ``, `{"prompt": "\ud800"}`, `[` + strings.Repeat("[", 20000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Decode(data)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if tr.Kind == "" || tr.Kind == "mst.trace" {
			t.Fatalf("Decode left the kind %q", tr.Kind)
		}
	})
}

func FuzzDecodeRun(f *testing.F) {
	good, _ := json.Marshal(Run{Kind: "mst.run", Version: RunVersion, ID: "r", Variants: []string{"v"}, Collect: CollectPartial,
		Runner: RunnerInfo{Name: "local", Options: map[string]string{"shards": "2"}, Machines: []Machine{{Shard: 1, Ended: "done"}}},
		Owner:  &Owner{PID: 1, Host: "h"}, Stopped: []StoppedVariant{{Variant: "v", Cause: CauseProvider}}})
	for _, s := range []string{string(good), `{"cases": -1, "trialsPerCase": 1e99}`, `{"runner": {"options": {"a": 1}}}`, `{"owner": null}`, `{"started": "2026-13-45T99:00:00Z"}`, `{"id": "r",`, "  \n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := DecodeRun(data); err != nil {
			checkDecodeError(t, err)
		}
	})
}
