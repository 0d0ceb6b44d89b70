package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// shardsBench measures how a run scales with shards on the processes
// runner. Every trial is one call of the test server's sleep tool, so each
// takes the same fixed latency and the ideal wall time is known:
//
//	ideal = trials × latency / (shards × concurrency)
//
// (no provider or server limit applies: the offline model has none). It
// prints, per shard count, the wall time of `mst run`, the ideal, their
// ratio, the bound the case split itself sets (the largest shard's trials ×
// latency / concurrency; cases are whole, so shards differ in size), and
// how long shards took to start: from the run's start to the first trial
// of the shard, which covers making its folder, copying the bundle,
// starting `mst collect`, hello, the readiness check and opening the
// client.
type shardsBench struct {
	counts      string
	trials      int
	latency     time.Duration
	concurrency int
	// dir holds the bench's files, runs and shard folders ("": the
	// system's temporary folder).
	dir string
}

func (b *shardsBench) run() error {
	dir, err := os.MkdirTemp(b.dir, "mst-bench-shards-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "./cmd/mst", "./internal/testserver/cmd/mcp-testserver")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building (run this from the repository root): %w", err)
	}
	var cases strings.Builder
	prompt := fmt.Sprintf("sleep for %s seconds please", strconv.FormatFloat(b.latency.Seconds(), 'f', -1, 64))
	for i := range b.trials {
		fmt.Fprintf(&cases, "{\"id\": \"c%05d\", \"input\": %q}\n", i, prompt)
	}
	eval := fmt.Sprintf(`name: shards
datasets: [cases.jsonl]
servers:
  test: {command: %q}
variants:
  v: {model: offline}
trials: 1
limits: {concurrency: %d}
`, filepath.Join(bin, "mcp-testserver"), b.concurrency)
	if err := os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(cases.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(eval), 0o644); err != nil {
		return err
	}

	fmt.Printf("%d trials of %s each, %d at once per shard, processes runner, %d CPUs, files in %s\n", b.trials, b.latency, b.concurrency, runtime.NumCPU(), dir)
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		// Other work on the machine shows in every figure below.
		fmt.Printf("load average before: %s\n", strings.Join(strings.Fields(string(load))[:3], " "))
	}
	fmt.Printf("%-7s %9s %9s %6s %11s %6s %17s %11s %8s %8s %10s\n", "shards", "wall", "ideal", "eff", "split bound", "eff", "start-up mean/max", "trial mean", "drain", "outside", "CPU/trial")
	for _, f := range strings.Split(b.counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-shards %s: want shard counts such as 1,2,4,8", b.counts)
		}
		results := filepath.Join(dir, "results-"+strconv.Itoa(n))
		cmd := exec.Command(filepath.Join(bin, "mst"), "run", filepath.Join(dir, "eval.yaml"), "--results", results,
			"--runner", "processes", "--runner-option", "shards="+strconv.Itoa(n), "--runner-option", "dir="+filepath.Join(dir, "shards"), "--json")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(start)
		if err != nil {
			return fmt.Errorf("mst run with %d shards: %w\n%s", n, err, out)
		}
		// The rusage of mst includes its waited-for descendants: the
		// workers and the MCP servers they ran.
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		m, err := measureRun(results)
		if err != nil {
			return err
		}
		if m.answered != b.trials {
			fmt.Printf("warning: %d of %d trials answered\n", m.answered, b.trials)
		}
		ideal := time.Duration(float64(b.trials) * float64(b.latency) / float64(n*b.concurrency))
		split := time.Duration(float64(m.largestShard) * float64(b.latency) / float64(b.concurrency))
		fmt.Printf("%-7d %9s %9s %5.0f%% %11s %5.0f%% %8s/%-8s %11s %8s %8s %10s\n", n,
			wall.Round(time.Millisecond), ideal.Round(time.Millisecond), 100*ideal.Seconds()/wall.Seconds(),
			split.Round(time.Millisecond), 100*split.Seconds()/wall.Seconds(),
			m.startupMean.Round(time.Millisecond), m.startupMax.Round(time.Millisecond), m.trialMean.Round(100*time.Microsecond),
			m.drain.Round(time.Millisecond), (wall - m.runTime).Round(time.Millisecond), (cpu / time.Duration(b.trials)).Round(10*time.Microsecond))
	}
	fmt.Println()
	fmt.Println("eff: ideal (or the split's bound) over wall; start-up: run start to a shard's first trial;")
	fmt.Println("CPU/trial: CPU time of mst, its workers and their servers, per trial")
	fmt.Println("drain: last trial's end to the run's end (workers ending, gather, grades); outside: wall time outside run.json's started..ended")
	return nil
}

type runMeasure struct {
	answered                int
	largestShard            int
	startupMean, startupMax time.Duration
	trialMean               time.Duration
	// drain is from the last trial's end to the run's end; runTime is the
	// run's own span in run.json.
	drain, runTime time.Duration
}

// measureRun reads the one run under results: its run.json and every
// transcript.
func measureRun(results string) (runMeasure, error) {
	var m runMeasure
	runs, err := store.Dir{Root: results}.List(context.Background())
	if err != nil || len(runs) != 1 {
		return m, fmt.Errorf("want one run in %s, found %d (%v)", results, len(runs), err)
	}
	st := store.OpenDir(runs[0].Location, nil)
	rec, err := st.ReadRun(context.Background())
	if err != nil {
		return m, err
	}
	first := map[int]time.Time{}
	perShard := map[int]int{}
	var total time.Duration
	var last time.Time
	count := 0
	err = st.Transcripts(context.Background(), func(t *transcript.Transcript) error {
		count++
		if t.Outcome.Status == transcript.Answered {
			m.answered++
		}
		perShard[t.Shard]++
		if f, ok := first[t.Shard]; !ok || t.Timing.Started.Before(f) {
			first[t.Shard] = t.Timing.Started
		}
		total += time.Duration(t.Timing.DurationMs * float64(time.Millisecond))
		if t.Timing.Ended.After(last) {
			last = t.Timing.Ended
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	var sum time.Duration
	for s, f := range first {
		d := f.Sub(rec.Started)
		sum += d
		m.startupMax = max(m.startupMax, d)
		m.largestShard = max(m.largestShard, perShard[s])
	}
	if len(first) > 0 {
		m.startupMean = sum / time.Duration(len(first))
	}
	m.drain, m.runTime = rec.Ended.Sub(last), rec.Ended.Sub(rec.Started)
	if count > 0 {
		m.trialMean = total / time.Duration(count)
	}
	return m, nil
}
