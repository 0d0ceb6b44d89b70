package mcpproxy_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mst-eval/mst/servers"
)

// BenchmarkProxyOverhead measures what the proxy adds to a tool call on the
// same machine: the same echo call, b.N times straight to the stdio server
// and b.N times through a proxy (loopback streamable HTTP, then stdio), and
// prints both per-call times, the difference and calls per second.
//
//	go test ./mcpproxy -run '^$' -bench ProxyOverhead -benchtime 2000x
func BenchmarkProxyOverhead(b *testing.B) {
	ctx := context.Background()
	args := json.RawMessage(`{"text":"hello"}`)
	direct, err := servers.Connect(ctx, testServer(b, "tools"))
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	set := open(b, newHost(b), "bench", testServer(b, "tools"))
	proxied := connect(b, set, 0)

	measure := func(c *servers.Conn) time.Duration {
		// One call first, so that neither side pays for a cold start.
		if _, err := c.Call(ctx, "echo", args); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for range b.N {
			if _, err := c.Call(ctx, "echo", args); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	b.ResetTimer()
	d := measure(direct)
	p := measure(proxied)
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	b.ReportMetric(us(d), "direct-µs/call")
	b.ReportMetric(us(p), "proxied-µs/call")
	b.ReportMetric(us(p-d), "added-µs/call")
	b.ReportMetric(float64(time.Second)/float64(p), "proxied-calls/s")
	b.ReportMetric(float64(p)/float64(d), "ratio")
}
