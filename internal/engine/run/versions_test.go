//go:build unix

package run_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// cliEval is an eval of one case whose variant runs gemini-cli with the
// program at command (not on PATH), against the test server.
func cliEval(t *testing.T, command string) string {
	return writeEval(t, map[string]string{
		"eval.yaml": `
name: versions
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  cli:
    client: gemini-cli
    model: google/gemini-test
    clientOptions: {command: "` + command + `"}
`,
		"cases.jsonl": `{"id": "one", "input": "Please echo 'one'"}` + "\n",
	})
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// processesRun plans the eval at path (with the key in set) and returns
// the plan and the options of a one-shard run on the processes runner.
func processesRun(t *testing.T, path string, set *secrets.Set, thisMachine bool) (*run.Plan, run.Options) {
	t.Helper()
	req := request(path)
	req.Secrets, req.ThisMachine = set, thisMachine
	p, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(%s) = %v", path, err)
	}
	o := options(store.Dir{Root: t.TempDir(), Eval: "versions"})
	o.Secrets, o.Redact = set, secrets.NewRedactor(set)
	o.Runner = runner.ProcessesDefinition()
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: 1, Keep: runner.KeepNever}
	return p, o
}

// TestWorkerReportsProgramVersionAndImage runs a gemini-cli variant whose
// clientOptions.command is a program at a path of its own (not on PATH)
// on a worker of the processes runner, whose machine's image the
// environment names (MST_IMAGE_DIGEST, which a docker or kubernetes
// runner sets and the processes runner passes on). run.json records that
// program's version and the image the worker reported; the program's
// --version ran with PATH, HOME and nothing else: neither the run's key
// (the worker holds it) nor any other variable of MST's environment.
func TestWorkerReportsProgramVersionAndImage(t *testing.T) {
	const (
		key    = "sk-canary-gemini-key-version-41aa"
		canary = "canary-not-for-clis-8d2f"
		image  = "mst-worker:run-test@sha256:feedface0123"
	)
	t.Setenv("MST_IMAGE_DIGEST", image)
	t.Setenv("MST_VERSION_CANARY", canary)
	dir := t.TempDir()
	rec := filepath.Join(dir, "envs")
	if err := os.Mkdir(rec, 0o700); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "own-bin", "gemini-at-a-path")
	if err := os.Mkdir(filepath.Dir(prog), 0o700); err != nil {
		t.Fatal(err)
	}
	writeScript(t, prog, `if [ "$1" = "--version" ]; then
  env > "`+rec+`/env.$$"
  echo "9.8.7-test"
  exit 0
fi
echo "this stand-in answers --version only" >&2
exit 3
`)
	set := secrets.New()
	set.Add("GEMINI_API_KEY", key)
	p, o := processesRun(t, cliEval(t, prog), set, true)
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	ms := out.Run.Runner.Machines
	if len(ms) != 1 {
		t.Fatalf("run.json machines = %+v, want one", ms)
	}
	if got := ms[0].ClientVersions["gemini-cli"]; got != "9.8.7-test" {
		t.Errorf("run.json records gemini-cli %q (all: %v), want 9.8.7-test, the version of the program the variant runs", got, ms[0].ClientVersions)
	}
	if ms[0].Image != image {
		t.Errorf("run.json records image %q, want %q, the one the worker reported", ms[0].Image, image)
	}
	tr, err := out.Store.ReadTranscript(t.Context(), transcript.Key{Case: "one", Variant: "cli", Trial: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Client.Version != "9.8.7-test" {
		t.Errorf("the transcript records gemini-cli %q, want 9.8.7-test", tr.Client.Version)
	}
	envs, _ := filepath.Glob(filepath.Join(rec, "env.*"))
	if len(envs) == 0 {
		t.Fatalf("the program was never asked its version")
	}
	// The shell adds PWD, SHLVL and _ of its own.
	allowed := []string{"PATH", "HOME", "PWD", "SHLVL", "_", "OLDPWD"}
	for _, f := range envs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if k, _, _ := strings.Cut(line, "="); !slices.Contains(allowed, k) {
				t.Errorf("`%s --version` ran with %s in its environment; want only %v", prog, k, allowed)
			}
		}
		if s := string(data); strings.Contains(s, key) || strings.Contains(s, canary) {
			t.Errorf("`%s --version` ran with the run's key or MST's environment in its own:\n%s", prog, s)
		}
	}
}

// TestSlowVersionDoesNotLoseWorker runs a gemini-cli variant whose
// program answers --version only when the test releases it, on a worker
// of the processes runner whose coordinator gives up after 5 s of
// silence: while the program is held, the worker goes on sending
// heartbeats (the test waits for 6 s of them), and once released the
// shard runs to its end, with the program's version in run.json.
func TestSlowVersionDoesNotLoseWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	for _, f := range []string{started, release} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatalf("making a FIFO: %v", err)
		}
	}
	prog := filepath.Join(dir, "slow-gemini")
	writeScript(t, prog, `if [ "$1" = "--version" ]; then
  echo asked > "`+started+`"
  read line < "`+release+`"
  echo "9.8.7-slow"
  exit 0
fi
exit 3
`)
	set := secrets.New()
	set.Add("GEMINI_API_KEY", "sk-dummy")
	// No preflight here: the worker is the first to ask.
	p, o := processesRun(t, cliEval(t, prog), set, false)
	const beat, silence, held = 100 * time.Millisecond, 5 * time.Second, 60
	o.Heartbeat, o.Silence = beat, silence
	beats := make(chan struct{}, 1024)
	o.Runner = linesTapped(o.Runner, func(line string) {
		if strings.Contains(line, `"type":"heartbeat"`) {
			select {
			case beats <- struct{}{}:
			default:
			}
		}
	})
	type executed struct {
		out *run.Outcome
		err error
	}
	done := make(chan executed, 1)
	go func() {
		out, err := run.Execute(context.WithoutCancel(t.Context()), p, o)
		done <- executed{out, err}
	}()
	// Unblocks the program whatever happens, so no process is left.
	unblock := func() {
		if f, err := os.OpenFile(release, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.WriteString("go\n")
			f.Close()
		}
	}
	asked := make(chan struct{})
	go func() {
		os.ReadFile(started) // returns once the program has written to it
		close(asked)
	}()
	select {
	case <-asked:
	case e := <-done:
		t.Fatalf("Execute returned (%v) before the worker asked its program's version", e.err)
	}
	for n := 0; n < held; n++ {
		select {
		case <-beats:
		case e := <-done:
			unblock()
			t.Fatalf("Execute returned (%v) while the program's --version was held, after %d heartbeats", e.err, n)
		}
	}
	unblock()
	e := <-done
	if e.err != nil {
		t.Fatalf("Execute = %v", e.err)
	}
	ms := e.out.Run.Runner.Machines
	if len(ms) != 1 || ms[0].Ended != "done" || ms[0].ClientVersions["gemini-cli"] != "9.8.7-slow" {
		t.Errorf("run.json machines = %+v, want one that ended done, with gemini-cli at 9.8.7-slow", ms)
	}
}

// linesTapped is def whose shards hand each line their worker writes to
// line, before the coordinator reads it.
func linesTapped(def *runner.Definition, line func(string)) *runner.Definition {
	return wrapRunner(def, func(r runner.Runner) runner.Runner { return lineTapRunner{r, line} })
}

type lineTapRunner struct {
	runner.Runner
	line func(string)
}

func (r lineTapRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	serve := s.Serve
	s.Serve = func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
		pr, pw := io.Pipe()
		var wg sync.WaitGroup
		wg.Go(func() {
			sc := bufio.NewScanner(io.TeeReader(in, pw))
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				r.line(sc.Text())
			}
			pw.CloseWithError(sc.Err())
		})
		err := serve(ctx, pr, out, fetch)
		pr.Close()
		wg.Wait()
		return err
	}
	return r.Runner.RunShard(ctx, s)
}

// TestAPITranscriptsRecordMSTVersion checks that the api client's
// transcripts record MST's version (what mst version prints), the
// version of the client, not Go's.
func TestAPITranscriptsRecordMSTVersion(t *testing.T) {
	t.Parallel()
	path := writeEval(t, map[string]string{
		"eval.yaml": `
name: apiversion
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
`,
		"cases.jsonl": `{"id": "a", "input": "Please echo 'a'"}` + "\n",
	})
	_, out, _ := newRun(t, path, nil)
	tr, err := out.Store.ReadTranscript(t.Context(), transcript.Key{Case: "a", Variant: "v", Trial: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Client.Name != "api" || tr.Client.Version != testVersion {
		t.Errorf("the api client's transcript records %s %q, want api %q (MST's version)", tr.Client.Name, tr.Client.Version, testVersion)
	}
	if ms := out.Run.Runner.Machines; len(ms) != 1 || ms[0].ClientVersions["api"] != testVersion {
		t.Errorf("run.json machines = %+v, want api at %s", ms, testVersion)
	}
}
