package offline

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mst-eval/mst/internal/provider"
)

func judgeRequest(system, user string) provider.Request {
	return provider.Request{System: system, Messages: []provider.Message{{Role: provider.User, Text: user}},
		Tools: []provider.Tool{{Name: "get_forecast", Description: "weather forecast"}}}
}

func TestJudgeRule(t *testing.T) {
	t.Parallel()
	const system = "You are a judge for MST (" + JudgeMarker + ").\nReply with JSON."
	tests := []struct {
		name, user string
		want       judgeReply
	}{
		{"reference, all found, default scale",
			"<task>\nforecast?\n</task>\n<reference>\nRain 12\n</reference>\n<answer>\nrain and 12 degrees\n</answer>\n",
			judgeReply{"pass", 5, "offline judge: 2 of the 2 words of the reference are in what the trial shows"}},
		{"task as target, one of three, scale 0 to 10",
			`<scale min="0" max="10"></scale>` + "\n<task>\nsnow in Tromsø tonight\n</task>\n<answer>\nno snow\n</answer>\n",
			judgeReply{"fail", 3, "offline judge: 1 of the 3 words of the task are in what the trial shows; missing: tromsø, tonight"}},
		{"tool calls count as material",
			"<task>\nOslo forecast\n</task>\n<tool_calls>\n[1] weather.wx_forecast {\"city\":\"Oslo\"}\n</tool_calls>\n",
			judgeReply{"pass", 5, "offline judge: 2 of the 2 words of the task are in what the trial shows"}},
		{"no target words",
			"<task>\nthe\n</task>\n<answer>\nanything\n</answer>\n",
			judgeReply{"fail", 1, "offline judge: 0 of the 0 words of the task are in what the trial shows"}},
		{"an unclosed section is empty",
			"<task>\nOslo forecast\n<answer>\nOslo forecast\n",
			judgeReply{"fail", 1, "offline judge: 0 of the 0 words of the task are in what the trial shows"}},
	}
	m, _ := New("offline")
	for _, tc := range tests {
		resp, err := m.Complete(context.Background(), judgeRequest(system, tc.user))
		if err != nil {
			t.Fatal(err)
		}
		var got judgeReply
		if err := json.Unmarshal([]byte(resp.Text), &got); err != nil || len(resp.ToolCalls) != 0 {
			t.Fatalf("%s: answer %q, calls %v: want a JSON verdict and no call", tc.name, resp.Text, resp.ToolCalls)
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Without the marker in the first line, the model plays its usual game.
	for _, sys := range []string{"", "Be brief.\n" + JudgeMarker} {
		resp, _ := m.Complete(context.Background(), judgeRequest(sys, "weather forecast please"))
		if len(resp.ToolCalls) != 1 {
			t.Errorf("system %q: %+v, want the tool call a client gets", sys, resp)
		}
	}
}
