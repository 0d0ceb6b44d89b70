//go:build unix

package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testDockerInterrupt sends SIGINT to the process group of a docker run,
// as a Ctrl-C at a terminal does: the docker CLI processes the coordinator
// started sit in groups of their own, so the workers' channels survive,
// the trials in flight come back cancelled, and no container is left.
func testDockerInterrupt(t *testing.T, tools string) {
	dir := t.TempDir()
	server, err := os.ReadFile(filepath.Join(tools, "mcp-testserver"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "mcp-testserver"), server, 0o755)
	os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(`name: ctrlc
datasets: [cases.jsonl]
servers:
  test: {command: ./bin/mcp-testserver}
variants:
  v: {model: offline}
trials: 1
limits: {concurrency: 4}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(`{"id": "a", "input": "Please echo 'one'"}
{"id": "b", "input": "Please echo 'two'"}
{"id": "slow-a", "input": "sleep for 300 seconds please"}
{"id": "slow-b", "input": "sleep for 300 seconds please"}
`), 0o644)
	results := filepath.Join(dir, "r")
	cmd := exec.Command(filepath.Join(tools, "mst"), "run", filepath.Join(dir, "eval.yaml"), "--results", results,
		"--runner", "docker", "--runner-option", "shards=2")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "transcripts", "v", "*.json"))
		if len(files) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("no transcript of the fast cases after 60s\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Errorf("mst run after SIGINT to its group exited %d (%v), want 130\n%s", code, err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("mst run still runs 60s after SIGINT\n%s", stderr.String())
	}
	runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("runs = %v, want one", runs)
	}
	raw, _ := os.ReadFile(runs[0])
	for _, want := range []string{`"answered": 2`, `"cancelled": 2`, `"missing": 0`, `"ended": "cancelled"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("run.json has no %s:\n%s", want, raw)
		}
	}
	id := filepath.Base(filepath.Dir(runs[0]))
	if out, err := exec.Command("docker", "ps", "--all", "--quiet", "--filter", "label=mst.run="+id).Output(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("containers of run %s after it ended: %q (%v), want none", id, out, err)
	}
}
