package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/provider/providertest"
)

// BenchmarkShardOverhead runs the same eval on processes shards and on
// docker shards (2, 4 and 8 of each), on a model that takes a fixed time
// to answer, and prints what a trial costs on each beyond the model's time,
// and the ratio docker/processes:
//
//	DOCKER_HOST=$(scripts/dockerd start) go test ./internal/cli/ -run '^$' -bench ShardOverhead -benchtime 1x
//
// Each trial calls mcp-testserver's echo tool and makes two model requests
// of at least 50 ms, one trial per case, one trial at a time in a shard
// (limits.concurrency is per shard). Each setting runs twice, with 3
// and with 9 cases per shard; the difference in wall time, over the 6 more
// trials per shard, is the time a trial takes in a shard (start-up, which
// both runs pay, drops out), and overhead is that minus the 100 ms of the
// model. Both runners get the same case ids, so the same split: the
// split's imbalance (a shard with more cases sets the wall time) is in
// both figures, and their difference, docker's cost per trial over
// processes', is free of it. Efficiency is the larger run's ideal wall
// time (model time over shards) over its measured one: start-up and the
// imbalance count there.
func BenchmarkShardOverhead(b *testing.B) {
	tools := dockerTools(b)
	const latency = 50 * time.Millisecond
	fake := providertest.New(b, providertest.Script{Offline: true, Latency: latency})
	overhead := map[string]float64{}
	run := func(b *testing.B, rn string, shards, cases int) time.Duration {
		dir := b.TempDir()
		var lines strings.Builder
		for i := range cases {
			fmt.Fprintf(&lines, `{"id": "c%d", "input": "Please echo 'word %d'", "expect": [{"toolCalled": "echo"}]}`+"\n", i, i)
		}
		os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(lines.String()), 0o644)
		os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(fmt.Sprintf(`name: shardbench
datasets: [cases.jsonl]
servers:
  test: {command: %q}
variants:
  v: {model: openai/gpt-test, clientOptions: {baseURL: %q, api: chat, maxRetries: 0}}
limits: {concurrency: 1}
`, filepath.Join(tools, "mcp-testserver"), fake.URL+"/v1")), 0o644)
		args := []string{"run", filepath.Join(dir, "eval.yaml"), "--json", "--results", filepath.Join(dir, "results"),
			"--runner", rn, "--runner-option", fmt.Sprintf("shards=%d", shards)}
		if rn == "docker" {
			args = append(args, "--runner-option", "network=host")
		} else {
			args = append(args, "--runner-option", "dir="+filepath.Join(dir, "shards"))
		}
		cmd := exec.Command(filepath.Join(tools, "mst"), args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("mst run: %v\n%s", err, stderr.String())
		}
		return time.Since(start)
	}
	for _, shards := range []int{2, 4, 8} {
		for _, rn := range []string{"processes", "docker"} {
			b.Run(fmt.Sprintf("%s/shards=%d", rn, shards), func(b *testing.B) {
				var small, large time.Duration
				for b.Loop() {
					small = run(b, rn, shards, 3*shards)
					large = run(b, rn, shards, 9*shards)
				}
				perTrial := float64((large - small).Milliseconds()) / 6
				over := perTrial - float64((2 * latency).Milliseconds())
				ideal := time.Duration(9*shards) * 2 * latency / time.Duration(shards)
				overhead[fmt.Sprintf("%s/%d", rn, shards)] = over
				overhead[fmt.Sprintf("%s/%d/trial", rn, shards)] = perTrial
				b.ReportMetric(perTrial, "ms/trial")
				b.ReportMetric(over, "ms-overhead/trial")
				b.ReportMetric(ideal.Seconds()/large.Seconds(), "efficiency")
				b.ReportMetric(small.Seconds(), "s-startup+3/shard")
			})
		}
		if p, d := overhead[fmt.Sprintf("processes/%d", shards)], overhead[fmt.Sprintf("docker/%d", shards)]; p != 0 || d != 0 {
			pt, dt := overhead[fmt.Sprintf("processes/%d/trial", shards)], overhead[fmt.Sprintf("docker/%d/trial", shards)]
			fmt.Printf("shards=%d: overhead per trial: processes %.0f ms, docker %.0f ms, docker adds %.0f ms a trial; a trial takes %.1f ms on docker, %.1f ms on processes: ratio %.3f\n", shards, p, d, d-p, dt, pt, dt/pt)
		}
	}
}
