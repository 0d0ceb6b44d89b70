// Command bench measures what MST itself costs, apart from the MCP servers
// it starts and the models it waits for. Run it from the repository root:
// it builds mst (stripped, as released) and what a mode needs into a
// temporary folder, runs `mst run` as a user would, and prints figures and
// ratios beside the machine's load average; it asserts nothing. It needs
// Linux: it reads each finished mst process's own CPU time from /proc.
//
//	go run ./internal/testkit/bench                  # -mode sizes: 1k, 10k and 100k trials
//	go run ./internal/testkit/bench -mode shards     # 1, 2, 4, 8 and 16 shards
//	MST_PEERS=$(scripts/peers) go run ./internal/testkit/bench -mode node
//	go run ./internal/testkit/bench -mode files -dir /tmp   # what storing a file costs there
//
// sizes (sizes.go) runs the quickstart on the offline model at each size
// and prints MST's own CPU time per trial, its servers' apart, and MST's
// peak memory, with the ratio between sizes ten times apart.
//
// shards (shards.go) runs trials of one fixed latency on the processes
// runner at each shard count, with realistic case ids, and prints the wall
// time against the ideal, and the CPU time per trial of the coordinator,
// the workers and the MCP servers apart.
//
// node (node.go) times a one-trial run with the npm everything server
// against that server's own start.
//
// files (files.go) measures what storing one transcript costs the file
// system of -dir, in user space and in the kernel: a part of every
// trial's CPU time that depends on the disk, not on MST.
//
// Targets (issue 20; on an idle machine of the project's kind): MST's own
// CPU time per trial at most 0.3 ms; peak memory at 100k trials at most
// 1.2 times that at 10k; 8 shards at least 90% efficient with realistic
// ids; a one-trial run with a Node server under 1 s beyond the server's
// own start.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/ground/tailbuf"
)

func main() {
	mode := flag.String("mode", "sizes", "what to measure: sizes, shards, node or files")
	dir := flag.String("dir", "", "folder for the bench's builds, runs and shard folders (default: the system's temporary folder); /dev/shm leaves the disk out")
	sizes := flag.String("sizes", "1000,10000,100000", "sizes: approximate trial counts, comma-separated")
	var sh shardsBench
	flag.StringVar(&sh.counts, "shards", "1,2,4,8,16", "shards: shard counts, comma-separated (setting it selects -mode shards)")
	flag.IntVar(&sh.trials, "trials", 2000, "shards: trials per run (rounded up to whole cases)")
	flag.DurationVar(&sh.latency, "latency", 50*time.Millisecond, "shards: how long each trial's tool call takes")
	flag.IntVar(&sh.concurrency, "concurrency", 4, "shards: trials at once in each shard (limits.concurrency)")
	flag.StringVar(&sh.ids, "ids", "slug,uuid,unicode,long", "shards: kinds of case ids, mixed in equal parts (slug, numbered, uuid, unicode, long)")
	flag.IntVar(&sh.variants, "variants", 1, "shards: variants of each case (1 or more)")
	flag.IntVar(&sh.caseTrials, "case-trials", 1, "shards: trials of each case under each variant")
	runs := flag.Int("runs", 3, "node: how many times to time the run and the server's start")
	files := flag.Int("files", 2000, "files: how many files to write")
	flag.Parse()
	if flagSet("shards") && !flagSet("mode") {
		*mode = "shards"
	}
	var err error
	switch *mode {
	case "sizes":
		err = runSizes(*dir, *sizes)
	case "shards":
		err = sh.run(*dir)
	case "node":
		err = runNode(*dir, *runs)
	case "files":
		err = runFiles(*dir, *files)
	default:
		err = fmt.Errorf("-mode %q: want sizes, shards, node or files", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// prepare makes the bench's folder under parent ("": the system's
// temporary folder) and builds mst and the given main packages into its
// bin folder. The caller removes the folder.
func prepare(parent, prefix string, pkgs ...string) (dir, bin string, err error) {
	dir, err = os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "bin")
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin + "/", "./cmd/mst"}, pkgs...)
	build := exec.Command("go", args...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("building (run the bench from the repository root): %w", err)
	}
	return dir, bin, nil
}

// runMST runs bin/mst with args, measured (see measure; follow picks the
// children to follow), and returns the figures and its wall time. Its
// output is dropped; when it fails, the error ends with the end of what it
// wrote to stderr.
func runMST(bin string, follow func(argv []string) bool, args ...string) (usage, time.Duration, error) {
	cmd := exec.Command(filepath.Join(bin, "mst"), args...)
	out := tailbuf.New(2048)
	cmd.Stderr = out // stdout, the report, goes to /dev/null
	start := time.Now()
	u, err := measure(cmd, follow)
	wall := time.Since(start)
	if err != nil {
		return u, wall, fmt.Errorf("mst %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return u, wall, nil
}

// machine prints what the figures depend on: the CPUs and the load
// average, which other work on the machine raises.
func machine() {
	fmt.Printf("%d CPUs, %s, load average %s\n", runtime.NumCPU(), runtime.Version(), loadAverage())
}
