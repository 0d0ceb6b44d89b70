// Command bench measures MST's own cost per trial: it builds mst and the
// quickstart's weather server, runs the quickstart on the offline model at
// about 1,000 and 10,000 trials in child processes, and prints trials per
// second, MST's CPU time per trial (the mst process only, not the server),
// and peak RSS. Run it from the repository root:
//
//	go run ./internal/bench            # 1k and 10k trials
//	go run ./internal/bench -sizes 1000
//
// Targets: under 2 ms of MST's time per trial; 1,000 trials under 5 s on 2
// cores; peak RSS flat in the number of trials.
//
// With -shards it measures sharded runs instead (see shards.go): the same
// trials, each a fixed latency long, on the processes runner at each shard
// count, against the ideal wall time:
//
//	go run ./internal/bench -shards 1,2,4,8 -trials 2000 -latency 50ms
//
// Targets: at least 90% of the ideal at 8 shards and 2,000 trials; shard
// start-up under 300 ms. Each trial creates two files (the worker's
// transcript and the coordinator's copy), so a filesystem that is slow to
// create files shows in the figures: -dir /dev/shm measures without it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	sizes := flag.String("sizes", "1000,10000", "approximate trial counts to measure, comma-separated")
	var sh shardsBench
	flag.StringVar(&sh.counts, "shards", "", "measure sharded runs on the processes runner at these shard counts, comma-separated (e.g. 1,2,4,8)")
	flag.IntVar(&sh.trials, "trials", 2000, "with -shards: trials per run")
	flag.DurationVar(&sh.latency, "latency", 50*time.Millisecond, "with -shards: how long each trial's tool call takes")
	flag.IntVar(&sh.concurrency, "concurrency", 4, "with -shards: trials at once in each shard (limits.concurrency)")
	flag.StringVar(&sh.dir, "dir", "", "with -shards: folder for the runs and the shards' folders (default: the system's temporary folder); /dev/shm leaves the disk out")
	flag.Parse()
	if sh.counts != "" {
		if err := sh.run(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(sizes string) error {
	dir, err := os.MkdirTemp("", "mst-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin+"/", "./cmd/mst", "./examples/quickstart/weather")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building: %w", err)
	}
	// The quickstart's eval names ../../bin/weather relative to itself.
	qs := filepath.Join(dir, "examples", "quickstart")
	os.MkdirAll(qs, 0o755)
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		b, err := os.ReadFile(filepath.Join("examples", "quickstart", f))
		if err != nil {
			return fmt.Errorf("run this from the repository root: %w", err)
		}
		os.WriteFile(filepath.Join(qs, f), b, 0o644)
	}
	const perTrialSet = 14 * 2 // cases × variants in the quickstart
	fmt.Printf("%-8s %10s %12s %14s %16s %12s\n", "trials", "wall", "trials/s", "mst CPU/trial", "wall/trial", "peak RSS")
	var base float64
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		reps := max(1, (n+perTrialSet-1)/perTrialSet)
		trials := reps * perTrialSet
		cmd := exec.Command(filepath.Join(bin, "mst"), "run", filepath.Join(qs, "eval.yaml"),
			"--trials", strconv.Itoa(reps), "--results", filepath.Join(dir, "results"), "--json")
		cmd.Stdout = nil
		start := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(start)
		if err != nil {
			return fmt.Errorf("mst run: %w\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		rssMB := float64(ru.Maxrss) / 1024
		if base == 0 {
			base = rssMB
		}
		fmt.Printf("%-8d %10s %12.0f %14s %16s %9.1f MB (×%.2f)\n", trials, wall.Round(time.Millisecond),
			float64(trials)/wall.Seconds(), (cpu / time.Duration(trials)).Round(time.Microsecond),
			(wall / time.Duration(trials)).Round(time.Microsecond), rssMB, rssMB/base)
	}
	return nil
}
