package servers_test

import (
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/servers"
)

// BenchmarkStubbornClose starts the npm everything server (which does not
// exit when its stdin closes: a timer of its keeps Node running), lists its
// tools and closes it, and prints how long each part takes: the server's
// own start, and what closing it costs on top (the stop grace, then
// SIGTERM). A trial and a readiness check each pay the close.
//
//	MST_PEERS=$(scripts/peers) go test ./servers -run '^$' -bench StubbornClose -benchtime 10x
func BenchmarkStubbornClose(b *testing.B) {
	s := peertest.Everything(b)
	var start, stop time.Duration
	for b.Loop() {
		t0 := time.Now()
		c, err := servers.Connect(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Tools) == 0 {
			b.Fatal("no tools listed")
		}
		t1 := time.Now()
		c.Close()
		start += t1.Sub(t0)
		stop += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(start.Milliseconds())/n, "start-ms")
	b.ReportMetric(float64(stop.Milliseconds())/n, "close-ms")
	b.Logf("the npm everything server: %.0f ms to start and list its tools, %.0f ms to close", float64(start.Milliseconds())/n, float64(stop.Milliseconds())/n)
}
