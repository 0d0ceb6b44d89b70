package shard

import (
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/transcript"
)

// TestTimeoutOutcome: what a trial was waiting on when its timeout passed
// decides its outcome. A tool call in flight then (still in flight, or
// ended by the deadline) makes it timed-out, whatever the client says; a
// model request the client had out makes it errored (provider); neither
// makes it timed-out, waiting on the client.
func TestTimeoutOutcome(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 12, 7, 12, 0, 30, 0, time.UTC)
	call := func(start, ms int) transcript.ToolCall {
		return transcript.ToolCall{Server: "wx", Tool: "forecast", Started: deadline.Add(time.Duration(start) * time.Second), DurationMs: float64(ms)}
	}
	cases := []struct {
		name       string
		ev         *mcpproxy.Evidence
		client     string
		status     string
		cause      string
		waitingOn  string
		detailPart string
	}{
		{"call in flight", &mcpproxy.Evidence{InFlight: []transcript.ToolCall{call(-5, 0)}}, transcript.WaitingModel, transcript.TimedOut, "", transcript.WaitingTool, "tool forecast of server wx"},
		{"call ended by the deadline", &mcpproxy.Evidence{Calls: []transcript.ToolCall{call(-10, 1000), call(-3, 3002)}}, "", transcript.TimedOut, "", transcript.WaitingTool, "forecast"},
		{"calls done before", &mcpproxy.Evidence{Calls: []transcript.ToolCall{call(-10, 1000)}}, transcript.WaitingModel, transcript.Errored, transcript.CauseProvider, transcript.WaitingModel, "model provider did not answer"},
		{"model, no proxies", nil, transcript.WaitingModel, transcript.Errored, transcript.CauseProvider, transcript.WaitingModel, "30s"},
		{"client's own tool", nil, transcript.WaitingTool, transcript.TimedOut, "", transcript.WaitingTool, "client's own tools"},
		{"nothing known", &mcpproxy.Evidence{}, "", transcript.TimedOut, "", transcript.WaitingClient, "the client was busy"},
	}
	for _, c := range cases {
		got := timeoutOutcome(30*time.Second, deadline, c.ev, c.client)
		if got.Status != c.status || got.Cause != c.cause || got.WaitingOn != c.waitingOn || !strings.Contains(got.Detail, c.detailPart) {
			t.Errorf("%s: timeoutOutcome = %+v, want %s (%s), waiting on %s, detail with %q", c.name, got, c.status, c.cause, c.waitingOn, c.detailPart)
		}
	}
}
