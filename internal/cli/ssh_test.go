package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/internal/testkit/sshtest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestSSH runs `mst run --runner ssh` against private sshd hosts
// (internal/testkit/sshtest): the quickstart on one host and on two, refusals
// before a run starts, a dropped connection and --resume, and cleanup of a
// kept machine. mst and the weather server are built into a temporary
// folder, so the mst that copies itself to the hosts is a real binary.
// The hosts share this file system, so the eval's server paths hold there.
func TestSSH(t *testing.T) {
	t.Parallel()
	sshtest.Need(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+string(filepath.Separator),
		"github.com/mst-eval/mst/cmd/mst", "github.com/mst-eval/mst/examples/quickstart/weather")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building mst and the weather server: %v\n%s", err, out)
	}
	s := &sshSuite{mst: filepath.Join(dir, "bin", "mst"), dir: dir}
	// The eval names ../../bin/weather relative to itself.
	s.quickstart = filepath.Join(dir, "examples", "quickstart", "eval.yaml")
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", f))
		if err != nil {
			t.Fatal(err)
		}
		writeSSHFile(t, filepath.Dir(s.quickstart), f, string(b))
	}
	t.Run("Quickstart", s.testQuickstart)
	t.Run("UnknownHostKey", s.testUnknownHostKey)
	t.Run("OtherVersion", s.testOtherVersion)
	t.Run("OtherPlatform", s.testOtherPlatform)
	t.Run("DropAndResume", s.testDropAndResume)
	t.Run("Cleanup", s.testCleanup)
	t.Run("Detach", s.testDetach)
}

type sshSuite struct {
	mst        string
	dir        string
	quickstart string
}

// run runs the built mst and returns its exit code and output.
func (s *sshSuite) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return s.runEnv(t, nil, args...)
}

// runEnv is run with env added to the test's environment.
func (s *sshSuite) runEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), s.mst, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running mst %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// sshOptions are the --runner flags that reach hosts (which share keys).
func sshOptions(hosts ...*sshtest.Host) []string {
	var targets []string
	for _, h := range hosts {
		targets = append(targets, h.Target())
	}
	return []string{"--runner", "ssh", "--runner-option", "hosts=" + strings.Join(targets, ","),
		"--runner-option", "identity=" + hosts[0].Keys.Identity, "--runner-option", "knownHosts=" + hosts[0].Keys.KnownHosts}
}

// startSSHHost starts a host and, when the test ends, checks that nothing
// its sessions started still runs and that no work folder is left.
func startSSHHost(t *testing.T, o sshtest.Options) *sshtest.Host {
	t.Helper()
	h := sshtest.Start(t, o)
	t.Cleanup(func() {
		deadline := time.Now().Add(20 * time.Second)
		for len(h.Sessions()) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if left := h.Sessions(); len(left) > 0 {
			t.Errorf("processes still running on %s after the test: %v", h.Addr, left)
		}
	})
	return h
}

// workFolders lists the shards' work folders left on a host.
func workFolders(h *sshtest.Host) []string {
	m, _ := filepath.Glob(filepath.Join(h.Home, ".cache", "mst", "work", "*"))
	return m
}

type passRate struct {
	PassRate       *float64
	Passed, Graded int
}

// rates runs the quickstart with extra flags and returns its pass rates by
// variant.
func (s *sshSuite) rates(t *testing.T, results string, extra ...string) map[string]passRate {
	t.Helper()
	code, stdout, stderr := s.run(t, append([]string{"run", s.quickstart, "--json", "--results", results}, extra...)...)
	if code != 0 {
		t.Fatalf("mst run %s exited %d\n%s", strings.Join(extra, " "), code, stderr)
	}
	var rep struct {
		Variants []struct {
			Variant  string   `json:"variant"`
			PassRate *float64 `json:"passRate"`
			Passed   int      `json:"passed"`
			Graded   int      `json:"graded"`
		} `json:"variants"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, stdout)
	}
	out := map[string]passRate{}
	for _, v := range rep.Variants {
		out[v.Variant] = passRate{v.PassRate, v.Passed, v.Graded}
	}
	return out
}

// testQuickstart runs the quickstart locally, on one host, and in two
// shards on two hosts (the second in a network namespace of its own when
// one can be made): the pass rates agree.
func (s *sshSuite) testQuickstart(t *testing.T) {
	t.Parallel()
	local := s.rates(t, filepath.Join(s.dir, "local"))
	if len(local) != 2 || local["terse"].Graded != 42 || local["clear"].Graded != 42 {
		t.Fatalf("local quickstart report = %+v, want two variants of 42 graded trials", local)
	}
	h1 := startSSHHost(t, sshtest.Options{})
	one := s.rates(t, filepath.Join(s.dir, "one"), sshOptions(h1)...)
	if diff := cmp.Diff(local, one); diff != "" {
		t.Errorf("pass rates, local (-) against one ssh host (+):\n%s", diff)
	}
	if left := workFolders(h1); len(left) > 0 {
		t.Errorf("work folders left on %s: %v", h1.Addr, left)
	}

	h2 := startSSHHost(t, sshtest.Options{Keys: h1.Keys, Namespace: true})
	if h2.Namespace == "" {
		t.Logf("no network namespace here: the second host is another sshd on %s", h2.Addr)
	} else {
		t.Logf("the second host is in network namespace %s at %s", h2.Namespace, h2.Addr)
	}
	results := filepath.Join(s.dir, "two")
	two := s.rates(t, results, append(sshOptions(h1, h2), "--runner-option", "shards=2")...)
	if diff := cmp.Diff(local, two); diff != "" {
		t.Errorf("pass rates, local (-) against two shards on two hosts (+):\n%s", diff)
	}
	rec := readSSHRun(t, results)
	var ids []string
	for _, m := range rec.Runner.Machines {
		ids = append(ids, m.ID)
		if m.Ended != "done" || m.MSTVersion == "" {
			t.Errorf("machine %s ended %q with mst %q, want done with a version", m.ID, m.Ended, m.MSTVersion)
		}
	}
	if len(ids) != 2 || !strings.Contains(strings.Join(ids, " "), "@"+h1.Addr+"/") || !strings.Contains(strings.Join(ids, " "), "@"+h2.Addr+"/") {
		t.Errorf("machines %v, want one shard on %s and one on %s", ids, h1.Addr, h2.Addr)
	}
	for _, h := range []*sshtest.Host{h1, h2} {
		if left := workFolders(h); len(left) > 0 {
			t.Errorf("work folders left on %s: %v", h.Addr, left)
		}
	}
}

// testUnknownHostKey: a host missing from known_hosts is refused before
// the run starts, with the command that adds it.
func (s *sshSuite) testUnknownHostKey(t *testing.T) {
	t.Parallel()
	h := startSSHHost(t, sshtest.Options{NoKnownHosts: true})
	results := filepath.Join(t.TempDir(), "r")
	code, _, stderr := s.run(t, append([]string{"run", s.quickstart, "--results", results}, sshOptions(h)...)...)
	_, port, _ := strings.Cut(h.Addr, ":")
	fix := "ssh-keyscan -p " + port + " 127.0.0.1 >> " + h.Keys.KnownHosts
	if code == 0 || !strings.Contains(stderr, "is not in "+h.Keys.KnownHosts) || !strings.Contains(stderr, fix) {
		t.Errorf("mst run on a host missing from known_hosts exited %d:\n%s\nwant it refused with %q", code, stderr, fix)
	}
	if runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "run.json")); len(runs) > 0 {
		t.Errorf("a refused run left run folders: %v", runs)
	}
}

// testOtherVersion: an mst of another version named with mst=PATH is
// refused before the run starts.
func (s *sshSuite) testOtherVersion(t *testing.T) {
	t.Parallel()
	h := startSSHHost(t, sshtest.Options{})
	old := filepath.Join(t.TempDir(), "mst")
	writeSSHFile(t, filepath.Dir(old), "mst", "#!/bin/sh\necho 'mst 0.0.1'\n")
	os.Chmod(old, 0o755)
	code, _, stderr := s.run(t, append([]string{"run", s.quickstart, "--results", t.TempDir()}, append(sshOptions(h), "--runner-option", "mst="+old)...)...)
	if code == 0 || !strings.Contains(stderr, `"mst 0.0.1"`) || !strings.Contains(stderr, "leave out --runner-option mst") {
		t.Errorf("mst run with mst=%s (another version) exited %d:\n%s\nwant it refused, naming the versions and the fix", old, code, stderr)
	}
}

// testOtherPlatform: a host whose uname reports another architecture gets
// no copy of this mst; the message says what to do.
func (s *sshSuite) testOtherPlatform(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	arch, goarch := "aarch64", "arm64"
	if runtime.GOARCH == "arm64" {
		arch, goarch = "x86_64", "amd64"
	}
	writeSSHFile(t, bin, "uname", "#!/bin/sh\necho 'Linux "+arch+"'\n")
	os.Chmod(filepath.Join(bin, "uname"), 0o755)
	h := startSSHHost(t, sshtest.Options{Env: map[string]string{"PATH": bin + ":/usr/local/bin:/usr/bin:/bin"}})
	code, _, stderr := s.run(t, append([]string{"run", s.quickstart, "--results", t.TempDir()}, sshOptions(h)...)...)
	want := "is linux/" + goarch + "; this mst is " + runtime.GOOS + "/" + runtime.GOARCH + ": install mst"
	if code == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--runner-option mst=PATH") {
		t.Errorf("mst run on a host of another architecture exited %d:\n%s\nwant it refused with %q", code, stderr, want)
	}
}

// testDropAndResume cuts the SSH connection while trials sleep on the
// host: the finished trials are kept, the shard is lost, nothing keeps
// running on the host, and --resume runs exactly the rest.
func (s *sshSuite) testDropAndResume(t *testing.T) {
	t.Parallel()
	server, err := exec.LookPath("mcp-testserver")
	if err != nil {
		t.Fatalf("the test MCP server is not on PATH (TestMain puts it there): %v", err)
	}
	h := startSSHHost(t, sshtest.Options{})
	dir := t.TempDir()
	// The slow trials sleep until the drop: the test server marks each
	// sleep call in marks as it starts, and ends them at once only once
	// marks holds the wake file, which the resume needs.
	marks := filepath.Join(dir, "marks")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSSHFile(t, dir, "eval.yaml", `name: drop
datasets: [cases.jsonl]
servers:
  test: {command: `+server+`, args: [--mark, `+marks+`]}
variants:
  v: {model: offline}
limits: {concurrency: 4}
`)
	writeSSHFile(t, dir, "cases.jsonl", `{"id": "a", "input": "Please echo 'one'"}
{"id": "b", "input": "Please echo 'two'"}
{"id": "c", "input": "Please echo 'three'"}
{"id": "d", "input": "Please echo 'four'"}
{"id": "slow-a", "input": "sleep for 300 seconds please"}
{"id": "slow-b", "input": "sleep for 300 seconds please"}
{"id": "slow-c", "input": "sleep for 300 seconds please"}
`)
	results := filepath.Join(dir, "r")
	args := append([]string{"run", filepath.Join(dir, "eval.yaml"), "--results", results}, sshOptions(h)...)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), s.mst, args...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Once the four quick trials are back and the three slow ones are in
	// their sleep calls, cut the connection under them.
	waitSSH(t, 60*time.Second, "four transcripts", func() bool {
		m, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "transcripts", "*", "*.json"))
		return len(m) >= 4
	})
	waitSSH(t, 60*time.Second, "three sleep calls", func() bool {
		m, _ := filepath.Glob(filepath.Join(marks, "sleep-*"))
		return len(m) >= 3
	})
	if n, err := h.Drop(); n == 0 || err != nil {
		t.Fatalf("dropping the connections: %d killed, %v", n, err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("mst run did not end within 60s of the dropped connection\n%s", stderr.String())
	}
	rec := readSSHRun(t, results)
	t.Logf("after the drop: collect %s, counts %+v, note %q", rec.Collect, rec.Counts, rec.Note)
	if rec.Collect != transcript.CollectPartial || rec.Counts.Answered != 4 || rec.Counts.Answered+rec.Counts.Missing+rec.Counts.Cancelled != 7 {
		t.Errorf("after the drop: collect %s, counts %+v; want partial with the 4 quick trials answered\n%s", rec.Collect, rec.Counts, stderr.String())
	}
	if len(rec.Runner.Machines) != 1 || rec.Runner.Machines[0].Ended != "lost" {
		t.Errorf("machines after the drop: %+v, want one that ended lost", rec.Runner.Machines)
	}
	// The worker noticed its lost coordinator and ended, and its folder
	// went when the coordinator logged in again.
	waitSSH(t, 20*time.Second, "the host's sessions to end", func() bool { return len(h.Sessions()) == 0 })
	if left := workFolders(h); len(left) > 0 {
		t.Errorf("work folders left on the host after the drop: %v", left)
	}
	before := transcriptsByName(t, results)

	// The resumed sleep calls end at once.
	if err := os.WriteFile(filepath.Join(marks, testserver.WakeFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(store.EvalRunsDir(results, rec.Eval), rec.ID)
	code, _, errOut := s.run(t, append([]string{"run", "--resume", runDir}, sshOptions(h)...)...)
	if code != 0 {
		t.Fatalf("mst run --resume exited %d\n%s", code, errOut)
	}
	rec = readSSHRun(t, results)
	if rec.Collect != transcript.CollectComplete || rec.Counts.Answered != 7 || rec.Resumes != 1 {
		t.Errorf("after --resume: collect %s, counts %+v, resumes %d; want complete, 7 answered, 1", rec.Collect, rec.Counts, rec.Resumes)
	}
	after := transcriptsByName(t, results)
	for name, body := range before {
		if after[name] != body {
			t.Errorf("--resume changed %s, which the first attempt finished", name)
		}
	}
}

// testCleanup keeps a run's machine and removes it with mst runner
// cleanup.
func (s *sshSuite) testCleanup(t *testing.T) {
	t.Parallel()
	h := startSSHHost(t, sshtest.Options{})
	results := filepath.Join(t.TempDir(), "r")
	code, _, stderr := s.run(t, append([]string{"run", s.quickstart, "--results", results, "--limit", "1", "--trials", "1"},
		append(sshOptions(h), "--runner-option", "keep=always")...)...)
	if code != 0 {
		t.Fatalf("mst run with keep=always exited %d\n%s", code, stderr)
	}
	if left := workFolders(h); len(left) != 1 {
		t.Fatalf("work folders after keep=always: %v, want one", left)
	}
	rec := readSSHRun(t, results)
	opts := sshOptions(h)[2:]
	code, stdout, stderr := s.run(t, append([]string{"runner", "cleanup", filepath.Join(store.EvalRunsDir(results, rec.Eval), rec.ID)}, opts...)...)
	if code != 0 {
		t.Fatalf("mst runner cleanup exited %d\n%s%s", code, stdout, stderr)
	}
	if left := workFolders(h); len(left) != 0 {
		t.Errorf("work folders after cleanup: %v\n%s", left, stdout)
	}
}

func readSSHRun(t *testing.T, results string) transcript.Run {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("run folders in %s: %v, want one", results, runs)
	}
	b, err := os.ReadFile(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec transcript.Run
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", runs[0], err)
	}
	return rec
}

// transcriptsByName reads every transcript of the run under results.
func transcriptsByName(t *testing.T, results string) map[string]string {
	t.Helper()
	out := map[string]string{}
	m, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*", "transcripts", "*", "*.json"))
	for _, p := range m {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p)] = string(b)
	}
	return out
}

func waitSSH(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waited %s for %s", limit, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func writeSSHFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testDetach detaches the quickstart (its first four cases) on the ssh
// runner, the run in a bucket (the GCS emulator, which the host's own
// environment names, as a machine's own identity would): the coordinator
// runs on the host, in a folder of its own, reaches the worker host with
// the host's own key, and ends; mst runs watch, here, follows it to done.
// Nothing of it is left on the host: no folder, no process.
func (s *sshSuite) testDetach(t *testing.T) {
	g := blobtest.StartGCS(t)
	bucket := g.NewBucket(t)
	h := startSSHHost(t, sshtest.Options{Env: map[string]string{"STORAGE_EMULATOR_HOST": g.Host()}})
	results := "gs://" + bucket + "/team"
	env := g.Env()
	args := append([]string{"run", s.quickstart, "--limit", "4", "--results", results, "--detach", "--detach-heartbeat", "300ms"}, sshOptions(h)...)
	code, stdout, stderr := s.runEnv(t, env, args...)
	if code != 0 {
		t.Fatalf("mst %s exited %d\n%s", strings.Join(args, " "), code, stderr)
	}
	id := strings.TrimSpace(stdout)
	if !strings.Contains(stderr, "the coordinator runs on ssh://"+h.User+"@") {
		t.Errorf("the launch does not say where the coordinator runs:\n%s", stderr)
	}
	code, stdout, stderr = s.runEnv(t, env, "runs", "watch", id, "-c", s.quickstart, "--results", results, "--interval", "300ms")
	if code != 0 || !strings.Contains(stdout, "state      done") || !strings.Contains(stdout, "trials     24 collected, 24 graded, of 24") {
		t.Fatalf("mst runs watch exited %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = s.runEnv(t, env, "report", results+"/quickstart/runs/")
	if code != 0 || !strings.Contains(stdout, " complete ") {
		t.Errorf("mst report of the eval's runs exited %d:\n%s\n%s", code, stdout, stderr)
	}
	waitSSH(t, time.Minute, "the coordinator's folder to go from the host", func() bool {
		m, _ := filepath.Glob(filepath.Join(h.Home, ".cache", "mst", "work", "coordinator-*"))
		return len(m) == 0
	})
}
