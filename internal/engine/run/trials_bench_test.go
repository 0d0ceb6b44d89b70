//go:build unix

package run_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/ground/gctune"
	"github.com/mst-eval/mst/store"
)

// benchTrials lists the run sizes BenchmarkTrials measures.
var benchTrials = flag.String("trials", "1000,10000", "BenchmarkTrials: approximate trial counts, comma-separated")

// benchBare runs the quickstart's cases against an MCP server served over
// HTTP by this process, so that a trial starts no process, costs little
// but MST's own work, and large runs are quick.
var benchBare = flag.Bool("bare", false, "BenchmarkTrials: the quickstart's cases with an in-process HTTP MCP server")

// benchHeapProfile, when set, names a folder where BenchmarkTrials writes
// a heap profile of each size at the end of its run, before the report is
// dropped: what a run holds per trial.
var benchHeapProfile = flag.String("heapprofiles", "", "BenchmarkTrials: write heap profiles into this folder")

// BenchmarkTrials runs the quickstart (14 cases, 2 variants, the offline
// model, its weather server) in this process on the local runner at about
// 1,000 and 10,000 trials (-trials 1000,10000,100000 adds 100,000), and
// reports MST's own CPU time per trial (this process only: the weather
// servers are child processes, and RUSAGE_SELF leaves them out), with the
// part of it spent in the kernel (file system, pipes, starting servers),
// and the peak heap, live (marked by a collection) and in use, with the
// ratio of each size's live peak to the first size's. Targets (issue 20):
// about 0.3 ms of CPU per trial; the live peak at 100,000 trials within
// 1.2 times that at 10,000. The run's store is under $TMPDIR:
// TMPDIR=/dev/shm leaves the disk's file system out of the kernel's part.
//
//	go test ./internal/engine/run/ -run '^$' -bench Trials -benchtime 1x -trials 1000,10000,100000
func BenchmarkTrials(b *testing.B) {
	gctune.Apply()               // as the mst command does
	gc := debug.SetGCPercent(-1) // (reads the target)
	debug.SetGCPercent(gc)
	var first uint64
	for _, s := range strings.Split(*benchTrials, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("-trials: %v", err)
		}
		const perTrial = 14 * 2 // the quickstart's cases × variants
		reps := max(1, (n+perTrial-1)/perTrial)
		trials := reps * perTrial
		b.Run(strconv.Itoa(trials), func(b *testing.B) {
			path := quickstartEval(b, *benchBare)
			var cpu, sys float64
			var peak heapPeak
			for b.Loop() {
				req := request(path)
				req.Selection.Trials = reps
				p, err := run.NewPlan(b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				st := store.Dir{Root: b.TempDir(), Eval: "quickstart"}
				runtime.GC()
				pk, stop := sampleHeap()
				if *benchHeapProfile != "" {
					stopProfiles := profilePeaks(b, filepath.Join(*benchHeapProfile, fmt.Sprintf("peak-%d.pprof", trials)))
					defer stopProfiles()
				}
				user0, sys0 := cpuTimes()
				out, err := run.Execute(b.Context(), p, options(st))
				user1, sys1 := cpuTimes()
				cpu += (user1 - user0 + sys1 - sys0).Seconds()
				sys += (sys1 - sys0).Seconds()
				stop()
				if err != nil {
					b.Fatal(err)
				}
				if got := out.Run.Counts.Done(); got != trials {
					b.Fatalf("Execute(%d trials) ran %d", trials, got)
				}
				if *benchHeapProfile != "" {
					writeHeapProfile(b, filepath.Join(*benchHeapProfile, fmt.Sprintf("heap-%d.pprof", trials)))
				}
				runtime.KeepAlive(out)
				peak.live, peak.inuse = max(peak.live, pk.live), max(peak.inuse, pk.inuse)
			}
			if first == 0 {
				first = peak.live
			}
			perTrialMs := cpu / float64(b.N) / float64(trials) * 1000
			sysMs := sys / float64(b.N) / float64(trials) * 1000
			b.ReportMetric(perTrialMs, "cpu-ms/trial")
			b.ReportMetric(sysMs, "sys-ms/trial")
			b.ReportMetric(float64(peak.live)/(1<<20), "peak-live-MiB")
			b.ReportMetric(float64(peak.inuse)/(1<<20), "peak-inuse-MiB")
			b.ReportMetric(float64(peak.live)/float64(first), "live-ratio")
			b.Logf("%d trials at GOGC=%d: %.3f ms of MST's CPU a trial (%.3f in user space, %.3f in the kernel); peak heap live %.1f MiB (×%.2f the first size), in use %.1f MiB",
				trials, gc, perTrialMs, perTrialMs-sysMs, sysMs, float64(peak.live)/(1<<20), float64(peak.live)/float64(first), float64(peak.inuse)/(1<<20))
		})
	}
}

// quickstartEval copies the quickstart's eval and cases into a folder of
// the benchmark's, with its server command pointing at the weather server
// built for these tests; bare replaces the eval with one of two variants
// whose server is a streamable-HTTP one in this process (no process
// started per trial), graded by the quickstart's judge and the cases' own
// graders.
func quickstartEval(b *testing.B, bare bool) string {
	b.Helper()
	dir := b.TempDir()
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "quickstart", f))
		if err != nil {
			b.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), "command: ../../bin/weather", "command: "+weatherServer)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if bare {
		const eval = `name: bare
datasets: [cases.jsonl]
servers:
  weather: {url: WEATHER}
variants:
  terse: {client: api, model: offline}
  clear: {client: api, model: offline}
graders:
  - judge: {rubric: supported, model: offline, gate: false}
limits: {concurrency: 4}
`
		text := strings.ReplaceAll(eval, "WEATHER", httpWeather(b))
		if err := os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return filepath.Join(dir, "eval.yaml")
}

// writeHeapProfile writes the live heap, as a collection now finds it, to
// path.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// profilePeaks writes a heap profile to path each time the live heap
// passes its peak so far by a tenth, until stop is called: the last one
// shows what the run held at its largest.
func profilePeaks(b *testing.B, path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(live)
			if v := live[0].Value.Uint64(); v > peak+peak/10 {
				peak = v
				f, err := os.Create(path)
				if err != nil {
					b.Error(err)
					return
				}
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// httpWeather serves a stand-in weather MCP server (the quickstart's five
// tool names, one canned answer) over streamable HTTP on the loopback for
// the benchmark's life, and returns its URL. Its work is done in this
// process, so with -bare the CPU figure includes the server's side of
// each MCP session too.
func httpWeather(b *testing.B) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	for _, name := range []string{"wx_forecast", "wx_now", "wx_alerts", "wx_convert", "wx_cities"} {
		tool := &mcp.Tool{Name: name, Description: "Weather for a city: " + name, InputSchema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "rain, then snow; highs of 3 °C"}}}, nil
		})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(ts.Close)
	return ts.URL
}
