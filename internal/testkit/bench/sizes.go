package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// quickstartTrials is the quickstart's trials per repetition: 14 cases ×
// 2 variants.
const quickstartTrials = 14 * 2

// runSizes runs the quickstart (its weather server, the offline model, an
// offline judge) in one local shard at about each of sizes trials, and
// prints per size:
//
//   - mst CPU/trial: the mst process's own CPU time (user + system, all
//     threads), read from /proc/PID/stat after it exited and before it was
//     reaped, so no child is in it;
//   - servers CPU/trial: the CPU time of the processes mst waited for:
//     each trial's weather server (one per trial);
//   - mst peak RSS: the mst process's own peak resident memory (VmHWM,
//     read every 10 ms while it ran), and its ratio to the size a tenth as
//     large when that was measured too (the target is at most 1.2).
func runSizes(parent, sizes string) error {
	var ns []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-sizes %s: want trial counts such as 1000,10000,100000", sizes)
		}
		ns = append(ns, n)
	}
	dir, bin, err := prepare(parent, "mst-bench-", "./examples/quickstart/weather")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The quickstart's eval names ../../bin/weather relative to itself.
	qs := filepath.Join(dir, "examples", "quickstart")
	if err := os.MkdirAll(qs, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		b, err := os.ReadFile(filepath.Join("examples", "quickstart", f))
		if err != nil {
			return fmt.Errorf("run this from the repository root: %w", err)
		}
		if err := os.WriteFile(filepath.Join(qs, f), b, 0o644); err != nil {
			return err
		}
	}
	machine()
	fmt.Printf("%-8s %9s %9s %14s %18s %11s %14s %6s %15s\n", "trials", "wall", "trials/s", "mst CPU/trial", "servers CPU/trial", "wall/trial", "mst peak RSS", "×first", "load after")
	peak := map[int]int64{}
	var first int64
	for i, n := range ns {
		reps := max(1, (n+quickstartTrials-1)/quickstartTrials)
		trials := reps * quickstartTrials
		results := filepath.Join(dir, "results-"+strconv.Itoa(i))
		u, wall, err := runMST(bin, nil, "run", filepath.Join(qs, "eval.yaml"), "--trials", strconv.Itoa(reps), "--results", results, "--json")
		if err != nil {
			return err
		}
		// A run's results are not needed after it; a large one would
		// crowd the next.
		os.RemoveAll(results)
		peak[n] = u.peakRSS
		if first == 0 {
			first = u.peakRSS
		}
		fmt.Printf("%-8d %9s %9.0f %14s %18s %11s %14s %6.2f %15s\n", trials, wall.Round(time.Millisecond),
			float64(trials)/wall.Seconds(), perTrial(u.own, trials), perTrial(u.children, trials),
			perTrial(wall, trials), megabytes(u.peakRSS), float64(u.peakRSS)/float64(first), loadAverage())
	}
	fmt.Println()
	fmt.Println("mst CPU/trial: the mst process alone; servers CPU/trial: the weather servers it started (one a trial);")
	fmt.Println("mst peak RSS: the mst process alone (VmHWM, sampled every 10 ms)")
	for _, n := range ns {
		if small, ok := peak[n/10]; ok && n%10 == 0 && small > 0 {
			fmt.Printf("peak RSS at %d trials over %d: ×%.2f (target ≤ 1.2)\n", n, n/10, float64(peak[n])/float64(small))
		}
	}
	return nil
}
