package mcpproxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
)

// BenchmarkProxyOverhead measures what the proxy adds to a tool call on the
// same machine. The same echo call goes b.N times down each of five paths:
//
//   - direct: straight to the stdio server;
//   - sdk-http: a bare streamable-HTTP round trip of the official SDK (its
//     client to its server on the loopback, the server answering the echo
//     itself, with the options the proxy uses);
//   - sdk-proxy: a bare proxy made of the SDK alone (that server, forwarding
//     each call to the stdio server through a session of its own), with
//     none of MST's logic: the least any proxy built this way can cost;
//   - proxied: through MST's proxy's HTTP face (loopback streamable HTTP,
//     then stdio), as a CLI client reaches it;
//   - in-process: through the proxy's in-process face (Set.Conns, then
//     stdio), as the api client reaches it.
//
// The paths take turns, 100 calls at a time, so that whatever else the
// machine does weighs on all of them alike, and each path's figure is its
// median turn. It prints each path's time per call, what each face of the
// proxy adds over a direct call (added for HTTP, in-process-added), the
// part of the HTTP face's cost which is MST's own (ours: proxied minus
// sdk-proxy), the ratio of proxied to direct and calls per second through
// each face. See docs/proxy.md, "Overhead".
//
//	go test ./mcpproxy -run '^$' -bench ProxyOverhead -benchtime 3000x -count 3
func BenchmarkProxyOverhead(b *testing.B) {
	ctx := context.Background()
	args := json.RawMessage(`{"text":"hello"}`)
	direct, err := servers.Connect(ctx, testServer(b, "tools"))
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	set := open(b, newHost(b), "bench", testServer(b, "tools"))
	paths := []*servers.Conn{
		direct,
		sdkServer(b, nil),
		sdkServer(b, func() *servers.Conn {
			up, err := servers.Connect(ctx, testServer(b, "tools"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { up.Close() })
			return up
		}()),
		connectHTTP(b, set, 0),
		set.Conns()[0],
	}
	call := func(c *servers.Conn) {
		if _, err := c.Call(ctx, "echo", args); err != nil {
			b.Fatal(err)
		}
	}
	// A few calls first, so that no path pays for a cold start.
	for _, c := range paths {
		for range 20 {
			call(c)
		}
	}
	const turn = 100
	turns := make([][]float64, len(paths)) // µs per call in each turn
	b.ResetTimer()
	for done, t := 0, 0; done < b.N; done, t = done+turn, t+1 {
		n := min(turn, b.N-done)
		for j := range paths {
			i := (t + j) % len(paths) // each path goes first in turn
			// A turn starts on a collected heap, so that it pays for the
			// garbage of its own calls, not for another path's.
			runtime.GC()
			start := time.Now()
			for range n {
				call(paths[i])
			}
			turns[i] = append(turns[i], float64(time.Since(start).Nanoseconds())/float64(n)/1000)
		}
	}
	b.StopTimer()
	// The median turn: a burst of other work on the machine spoils a few
	// turns of each path, not the figure.
	per := func(i int) float64 {
		slices.Sort(turns[i])
		return turns[i][len(turns[i])/2]
	}
	d, hop, bare, p, local := per(0), per(1), per(2), per(3), per(4)
	b.ReportMetric(d, "direct-µs/call")
	b.ReportMetric(hop, "sdk-http-µs/call")
	b.ReportMetric(bare, "sdk-proxy-µs/call")
	b.ReportMetric(p, "proxied-µs/call")
	b.ReportMetric(p-d, "added-µs/call")
	b.ReportMetric(p-bare, "ours-µs/call")
	b.ReportMetric(1e6/p, "proxied-calls/s")
	b.ReportMetric(p/d, "ratio")
	b.ReportMetric(local, "in-process-µs/call")
	b.ReportMetric(local-d, "in-process-added-µs/call")
	b.ReportMetric(1e6/local, "in-process-calls/s")
}

// sdkServer is a client, over streamable HTTP on the loopback, of a bare
// SDK server with the options MST's proxy uses. With up nil it offers an
// echo tool and answers it itself; otherwise it offers up's tools and
// forwards each call to up, answering with up's result.
func sdkServer(b *testing.B, up *servers.Conn) *servers.Conn {
	b.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	if up == nil {
		echo := &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}
		srv.AddTool(echo, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Text string }
			json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil
		})
	} else {
		for _, t := range up.Listed { // every tool, as MST's proxy offers them
			srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return up.CallRaw(ctx, t.Name, req.Params.Arguments)
			})
		}
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	ts := httptest.NewServer(h)
	b.Cleanup(ts.Close)
	// The same header as a proxy's, so that the client does the same work.
	c, err := servers.Connect(context.Background(), servers.Server{Name: "bare", URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer x"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkInProcessFace measures the in-process face's own work on a
// call, with no I/O: the echo tool is declared a write and the dry run
// answers it, so what is timed is the client's Conn.Call (the offered-tool
// check, the arguments compacted as the SDK would send them) and the
// proxy's handling (tracking the call, the call limit, the fault checks,
// the record).
//
//	go test ./mcpproxy -run '^$' -bench InProcessFace -benchtime 100000x
func BenchmarkInProcessFace(b *testing.B) {
	srv := testServer(b, "tools")
	srv.Writes, srv.DryRun = []string{"echo"}, servers.DryRunDeclared
	srv.Simulated = map[string]servers.SimulatedResult{"echo": {Text: "echo: hello"}}
	c := open(b, newHost(b), "bench", srv).Conns()[0]
	ctx, args := context.Background(), json.RawMessage(`{"text": "hello"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(ctx, "echo", args); err != nil {
			b.Fatal(err)
		}
	}
}
