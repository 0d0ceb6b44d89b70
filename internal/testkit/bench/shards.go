package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/ground/caseids"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// shardsBench measures how a run scales with shards on the processes
// runner. Every trial is one call of the test server's sleep tool, so each
// takes the same fixed latency and the ideal wall time is known:
//
//	ideal = trials × latency / (shards × concurrency)
//
// (no provider or server limit applies: the offline model has none). The
// cases have realistic ids (internal/ground/caseids), each run under every
// variant several times if asked, so the split works on what real
// datasets give it. It prints, per shard count, the wall time of `mst
// run`, the ideal, their ratio (the efficiency), the bound the case split
// itself sets (the largest shard's trials × latency / concurrency; cases
// are whole, so shards differ in size), and how long shards took to start:
// from the run's start to the first trial of the shard, which covers
// making its folder, copying the bundle, starting `mst collect`, hello,
// the readiness check and opening the client.
//
// A second table splits the CPU time per trial by process:
//
//   - coordinator: the `mst run` process alone, read from /proc/PID/stat
//     after it exited and before it was reaped: exact;
//   - workers: the `mst collect` processes (the coordinator's children),
//     each read from /proc every 10 ms until it exits; a worker read
//     after its exit (a zombie not yet reaped) is exact, the others miss
//     what they spent after their last reading;
//   - servers: the MCP servers the workers waited for, as the workers'
//     last readings count them (the same caveat);
//   - unseen: what the coordinator's children spent in all, less the two
//     columns above: the workers' and servers' CPU time after the
//     workers' last readings, and any other child of the coordinator;
//   - mst: coordinator + workers, MST's own CPU time per trial.
type shardsBench struct {
	counts      string
	trials      int
	latency     time.Duration
	concurrency int
	// ids are the kinds of case ids (caseids.Classes), mixed in equal
	// parts.
	ids string
	// variants and caseTrials multiply each case into trials.
	variants, caseTrials int
}

// cases writes the bench's dataset: enough cases, with ids of the chosen
// kinds in turn, for b.trials trials, each asking for a sleep of
// b.latency. It returns the number of trials.
func (b *shardsBench) cases(path string) (int, error) {
	classes := strings.Split(b.ids, ",")
	for _, c := range classes {
		if !caseids.Known(c) {
			return 0, fmt.Errorf("-ids %s: unknown kind %q (known: %s)", b.ids, c, strings.Join(caseids.Classes, ", "))
		}
	}
	if b.variants < 1 || b.caseTrials < 1 {
		return 0, fmt.Errorf("-variants %d -case-trials %d: want at least 1 of each", b.variants, b.caseTrials)
	}
	perCase := b.variants * b.caseTrials
	n := (b.trials + perCase - 1) / perCase
	prompt := fmt.Sprintf("sleep for %s seconds please", strconv.FormatFloat(b.latency.Seconds(), 'f', -1, 64))
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	seen := map[string]bool{}
	for i, c := range classes {
		// Each kind gets its share of the cases; the first kinds take
		// what does not divide evenly.
		share := n / len(classes)
		if i < n%len(classes) {
			share++
		}
		for _, id := range caseids.Make(c, share, 1) {
			if seen[id] {
				return 0, fmt.Errorf("case id %q made twice", id)
			}
			seen[id] = true
			if err := enc.Encode(map[string]string{"id": id, "input": prompt}); err != nil {
				return 0, err
			}
		}
	}
	return n * perCase, os.WriteFile(path, out.Bytes(), 0o644)
}

func (b *shardsBench) run(parent string) error {
	var counts []int
	for _, f := range strings.Split(b.counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-shards %s: want shard counts such as 1,2,4,8,16", b.counts)
		}
		counts = append(counts, n)
	}
	dir, bin, err := prepare(parent, "mst-bench-shards-", "./internal/testkit/testserver/cmd/mcp-testserver")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	trials, err := b.cases(filepath.Join(dir, "cases.jsonl"))
	if err != nil {
		return err
	}
	var variants strings.Builder
	for i := range b.variants {
		fmt.Fprintf(&variants, "  v%d: {model: offline}\n", i+1)
	}
	eval := fmt.Sprintf(`name: shards
datasets: [cases.jsonl]
servers:
  test: {command: %q}
variants:
%strials: %d
limits: {concurrency: %d}
`, filepath.Join(bin, "mcp-testserver"), variants.String(), b.caseTrials, b.concurrency)
	if err := os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(eval), 0o644); err != nil {
		return err
	}

	machine()
	fmt.Printf("%d trials (%d cases with %s ids × %d variants × %d trials) of %s each, %d at once per shard, processes runner, files in %s\n",
		trials, trials/(b.variants*b.caseTrials), b.ids, b.variants, b.caseTrials, b.latency, b.concurrency, dir)
	fmt.Printf("%-7s %9s %9s %6s %11s %6s %17s %11s %8s %8s %15s\n", "shards", "wall", "ideal", "eff", "split bound", "eff", "start-up mean/max", "trial mean", "drain", "outside", "load after")
	var cpu []string
	for _, n := range counts {
		results := filepath.Join(dir, "results-"+strconv.Itoa(n))
		worker := func(argv []string) bool { return len(argv) > 1 && argv[1] == "collect" }
		u, wall, err := runMST(bin, worker, "run", filepath.Join(dir, "eval.yaml"), "--results", results,
			"--runner", "processes", "--runner-option", "shards="+strconv.Itoa(n), "--runner-option", "dir="+filepath.Join(dir, "shards"), "--json")
		if err != nil {
			return err
		}
		m, err := measureRun(results)
		if err != nil {
			return err
		}
		if m.answered != trials {
			fmt.Printf("warning: %d of %d trials answered\n", m.answered, trials)
		}
		ideal := time.Duration(float64(trials) * float64(b.latency) / float64(n*b.concurrency))
		split := time.Duration(float64(m.largestShard) * float64(b.latency) / float64(b.concurrency))
		fmt.Printf("%-7d %9s %9s %5.0f%% %11s %5.0f%% %8s/%-8s %11s %8s %8s %15s\n", n,
			wall.Round(time.Millisecond), ideal.Round(time.Millisecond), 100*ideal.Seconds()/wall.Seconds(),
			split.Round(time.Millisecond), 100*split.Seconds()/wall.Seconds(),
			m.startupMean.Round(time.Millisecond), m.startupMax.Round(time.Millisecond), m.trialMean.Round(100*time.Microsecond),
			m.drain.Round(time.Millisecond), (wall - m.runTime).Round(time.Millisecond), loadAverage())
		workers, servers, final := u.kidsTotal()
		unseen := u.children - workers - servers
		cpu = append(cpu, fmt.Sprintf("%-7d %13s %13s %13s %13s %13s %9s %13s", n,
			perTrial(u.own+workers, trials), perTrial(u.own, trials), perTrial(workers, trials), perTrial(servers, trials),
			perTrial(unseen, trials), fmt.Sprintf("%d/%d", final, len(u.kids)), megabytes(u.peakRSS)))
	}
	fmt.Println()
	fmt.Printf("%-7s %13s %13s %13s %13s %13s %9s %13s\n", "shards", "mst/trial", "coordinator", "workers", "servers", "unseen", "exact", "coord. RSS")
	for _, row := range cpu {
		fmt.Println(row)
	}
	fmt.Println()
	fmt.Println("eff: ideal (or the split's bound) over wall; start-up: run start to a shard's first trial;")
	fmt.Println("drain: last trial's end to the run's end (workers ending, gather, grades); outside: wall time outside run.json's started..ended")
	fmt.Println("CPU time per trial: mst = coordinator + workers; servers: the MCP servers the workers waited for;")
	fmt.Println("unseen: the coordinator's children's CPU time after the workers' last readings; exact: workers read after they exited")
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
