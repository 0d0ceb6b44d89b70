//go:build unix

package run_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// BenchmarkRegrade grades 1,000 and 10,000 stored transcripts again with
// deterministic graders (mst grade), and reports the time of one regrade
// and the peak heap while it runs: in use (live and not yet collected, what
// the process holds) and live (marked by a collection). The target is
// under 2 s for 10,000, with a heap that does not grow with the number of
// transcripts beyond the report's one row per trial. Run both sizes to get
// the ratio of their peaks and the bytes each trial beyond the first 1,000
// adds:
//
//	go test ./run/ -run '^$' -bench Regrade -benchtime 3x
func BenchmarkRegrade(b *testing.B) {
	peaks := map[int]heapPeak{}
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st := storedRun(b, n)
			specs := []json.RawMessage{
				json.RawMessage(`{"toolCalled": {"tool": "wx_forecast", "arguments": {"city": "Oslo"}}}`),
				json.RawMessage(`{"answerContains": {"text": "rain", "ignoreCase": true}}`),
				json.RawMessage(`{"maxToolCalls": 3}`),
			}
			// What storing the run left is collected before sampling.
			runtime.GC()
			peak, stop := sampleHeap()
			cpu0 := cpuTime()
			b.ReportAllocs()
			for b.Loop() {
				out, err := run.Regrade(b.Context(), st, run.RegradeOptions{Graders: specs})
				if err != nil {
					b.Fatal(err)
				}
				if out.Graded != n {
					b.Fatalf("graded %d of %d", out.Graded, n)
				}
			}
			cpu := (cpuTime() - cpu0).Seconds() / float64(b.N)
			stop()
			peaks[n] = *peak
			b.ReportMetric(float64(peak.inuse)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peak.live)/(1<<20), "peak-live-MiB")
			b.ReportMetric(cpu, "cpu-s/op")
			b.Logf("%d transcripts: %.0f ms per regrade (%.2f CPU-s), peak heap in use %.1f MiB, live %.1f MiB",
				n, float64(b.Elapsed().Milliseconds())/float64(b.N), cpu, float64(peak.inuse)/(1<<20), float64(peak.live)/(1<<20))
			if small := peaks[1000]; n == 10000 && small.inuse > 0 {
				// (Logged here: a parent benchmark's log is not shown.)
				b.Logf("peak heap at 10,000 / at 1,000: in use %.2f, live %.2f; each trial beyond 1,000 adds %.0f bytes in use, %.0f bytes live",
					float64(peak.inuse)/float64(small.inuse), float64(peak.live)/float64(small.live),
					(float64(peak.inuse)-float64(small.inuse))/9000, (float64(peak.live)-float64(small.live))/9000)
			}
		})
	}
}

// heapPeak is the most heap seen: in use (runtime.MemStats.HeapInuse) and
// live (/gc/heap/live:bytes, what the latest collection marked).
type heapPeak struct{ inuse, live uint64 }

// sampleHeap samples the heap every 5 ms until stop is called, and keeps
// the peaks in *peak.
func sampleHeap() (peak *heapPeak, stop func()) {
	peak = &heapPeak{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// (runtime/metrics, not ReadMemStats: that stops the world, and
		// every 5 ms it cost the measured process about 2% of its CPU.)
		s := []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/memory/classes/heap/unused:bytes"},
		}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak.inuse = max(peak.inuse, s[1].Value.Uint64()+s[2].Value.Uint64())
			peak.live = max(peak.live, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return peak, func() { close(done); wg.Wait() }
}

// cpuTime is the CPU time this process used so far, user and system: a
// measure a loaded machine distorts less than the wall clock.
func cpuTime() time.Duration {
	user, sys := cpuTimes()
	return user + sys
}

// cpuTimes is the CPU time this process used so far in user space and in
// the kernel on its behalf (file system, pipes, starting processes).
func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// storedRun stores a run of n answered transcripts (100 cases, 2
// variants, n/200 trials each) with two tool calls each.
func storedRun(b *testing.B, n int) store.Run {
	b.Helper()
	ctx := b.Context()
	r, err := store.Dir{Root: b.TempDir(), Eval: "weather"}.Create(ctx, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	const cases, variants = 100, 2
	trials := n / (cases * variants)
	var cs []dataset.Case
	for c := range cases {
		cs = append(cs, dataset.Case{ID: fmt.Sprintf("case-%03d", c), Input: "Will it rain in Oslo?",
			Expect: []json.RawMessage{json.RawMessage(`{"toolNotCalled": "wx_alerts"}`)}})
	}
	if err := r.WriteCases(ctx, cs); err != nil {
		b.Fatal(err)
	}
	if err := r.WriteRun(ctx, transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "bench", Variants: []string{"terse", "clear"}, Trials: trials, Cases: cases, Collect: transcript.CollectComplete}); err != nil {
		b.Fatal(err)
	}
	keys := make(chan transcript.Key)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for k := range keys {
				t := &transcript.Transcript{
					Kind: "mst.transcript", Version: transcript.Version, Run: "bench", Key: k,
					Client: transcript.ClientInfo{Name: "api"}, Model: "offline", Prompt: "Will it rain in Oslo?",
					ToolCalls: []transcript.ToolCall{
						{ID: "1", Server: "weather", Tool: "wx_cities", Arguments: json.RawMessage(`{}`), Result: "Oslo, Tokyo, Lisbon, Cairo, Reykjavik"},
						{ID: "2", Server: "weather", Tool: "wx_forecast", Arguments: json.RawMessage(`{"city":"Oslo","days":3}`), Result: "Oslo: rain on Monday, cloudy on Tuesday, sun on Wednesday; highs 12, 14, 15 °C"},
					},
					Answer:  "Yes: rain in Oslo on Monday, then clouds and sun. Highs of 12 to 15 °C.",
					Outcome: transcript.Outcome{Status: transcript.Answered},
					Timing:  transcript.Timing{Started: time.Unix(1764000000, 0).UTC(), Ended: time.Unix(1764000002, 0).UTC(), DurationMs: 2000},
				}
				if _, err := r.WriteTranscript(ctx, t); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, c := range cs {
		for _, v := range []string{"terse", "clear"} {
			for i := 1; i <= trials; i++ {
				keys <- transcript.Key{Case: c.ID, Variant: v, Trial: i}
			}
		}
	}
	close(keys)
	wg.Wait()
	return r
}
