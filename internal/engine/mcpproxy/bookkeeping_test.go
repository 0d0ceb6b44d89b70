package mcpproxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
)

// BenchmarkProxyBookkeeping measures the proxy's own work on a call, with
// no I/O and no SDK: what its tool handler does around the call (tracking
// it for cancellation, the call limit, the fault checks, the record). A
// dry run answers the call, so that nothing is sent anywhere.
// BenchmarkProxyOverhead shows what a whole call through the proxy costs.
//
//	go test ./mcpproxy -run '^$' -bench ProxyBookkeeping
func BenchmarkProxyBookkeeping(b *testing.B) {
	tool := &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}
	decl := servers.Server{
		Name: "bench", Writes: []string{"echo"}, DryRun: servers.DryRunDeclared,
		Simulated: map[string]servers.SimulatedResult{"echo": {Text: "echo: hello"}},
		Tools:     map[string]servers.ToolOverride{"echo": {Name: "say"}},
		// A fault that never hits: its check still runs on every call.
		Faults: []servers.Fault{{Kind: servers.FaultError, Rate: 0.000001}},
	}
	v, err := newView(decl, []*mcp.Tool{tool})
	if err != nil {
		b.Fatal(err)
	}
	rec := &recorder{}
	p := &serverProxy{decl: decl, view: v, simulate: v.simulated(decl), seed: "trial\x00bench", rec: rec, budget: &budget{left: b.N + 1, max: b.N + 1}}
	args := json.RawMessage(`{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		c, done := p.track(ctx, "session")
		if _, err := p.call(c, "say", args); err != nil {
			b.Fatal(err)
		}
		done()
		if len(rec.calls) > 1000 {
			rec.calls = rec.calls[:0] // a trial's record, not a run's
		}
	}
}
