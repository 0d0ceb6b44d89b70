//go:build linux

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/internal/testkit/testserver"
)

// detachCanary is the secret a detached run's server reads: it must reach
// the workers through the secrets file, and never be stored, logged or
// put in an argv.
const detachCanary = "canary-detach-secret-5d71e2"

// detached is one detached run's world: a bucket in the GCS emulator, an
// eval whose server reads a secret, and a secrets file.
type detached struct {
	t        *testing.T
	w        *detachWorld
	dir      string
	eval     string
	secrets  string
	results  string
	bucket   *blob.Bucket
	marks    string
	launches []string
	// shm are the private secrets folders there were before the test.
	shm map[string]bool
}

// newShm lists the coordinators' private secrets folders made since the
// test began.
func (d *detached) newShm() []string {
	var out []string
	all, _ := filepath.Glob("/dev/shm/mst-secrets-*")
	for _, p := range all {
		if !d.shm[p] {
			out = append(out, p)
		}
	}
	return out
}

// newDetached makes the eval of cases (id → input), on the test server,
// two variants, one trial each, for the processes runner.
func newDetached(t *testing.T, cases map[string]string, order []string) *detached {
	t.Helper()
	return newDetachedOn(t, processesWorld(), cases, order)
}

// newDetachedOn is newDetached for the runner of w.
func newDetachedOn(t *testing.T, w *detachWorld, cases map[string]string, order []string) *detached {
	t.Helper()
	g := blobtest.StartGCS(t)
	name := g.NewBucket(t)
	blobtest.Setenv(t, g.Env())
	// A killed coordinator's lock on its run lasts this long, not a minute.
	t.Setenv(cli.LeaseEnv, "2s")
	if w.start != nil {
		w.start(t, g.Host())
	}
	dir := t.TempDir()
	d := &detached{t: t, w: w, dir: dir, results: "gs://" + name + "/team", bucket: g.OpenBucket(t, name), marks: filepath.Join(dir, "marks")}
	os.Mkdir(d.marks, 0o755)
	d.shm = map[string]bool{}
	before, _ := filepath.Glob("/dev/shm/mst-secrets-*")
	for _, p := range before {
		d.shm[p] = true
	}
	server := w.server(t, dir)
	d.eval = filepath.Join(dir, "eval.yaml")
	os.WriteFile(d.eval, []byte(`name: detached
datasets: [cases.jsonl]
servers:
  test:
    command: `+server+`
    args: [--mark, "`+d.marks+`"]
    env: {SRV_TOKEN: "${secret:SRV_TOKEN}"}
variants:
  v: {model: offline}
  w: {model: offline}
trials: 1
graders:
  - toolCalled: echo
limits: {concurrency: 4}
`), 0o644)
	var lines []string
	for _, id := range order {
		b, _ := json.Marshal(map[string]string{"id": id, "input": cases[id]})
		lines = append(lines, string(b))
	}
	os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	d.secrets = filepath.Join(dir, "secrets.env")
	os.WriteFile(d.secrets, []byte(strings.Join(append([]string{"SRV_TOKEN=" + detachCanary}, w.secrets...), "\n")+"\n"), 0o600)
	t.Cleanup(d.stopAll)
	return d
}

// mst runs the test binary as mst in a process of its own, as a person
// would type it, and returns its exit code and output.
func (d *detached) mst(args ...string) mstResult {
	d.t.Helper()
	bin := d.w.bin
	if bin == "" {
		bin = os.Args[0]
	}
	cmd := exec.Command(bin, args...)
	cmd.Args[0] = "mst"
	cmd.Dir = d.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			d.t.Fatalf("mst %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return mstResult{code, out.String(), errOut.String()}
}

// launch runs mst with args and --detach, and returns the detached run's
// id once the launching process has exited.
func (d *detached) launch(args ...string) string {
	d.t.Helper()
	args = append(args, "--detach", "--secrets-file", d.secrets, "--detach-heartbeat", "200ms", "--detach-log-every", "500ms")
	r := d.mst(args...)
	if r.code != 0 {
		d.t.Fatalf("mst %v exited %d\n%s", args, r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	if id == "" || strings.Contains(id, "\n") {
		d.t.Fatalf("mst %v printed %q, not one id\n%s", args, r.stdout, r.stderr)
	}
	d.launches = append(d.launches, id)
	return id
}

// status reads a detached run's status with mst runs status --json, at
// the clock now (zero: the real one).
func (d *detached) status(id string, now time.Time) map[string]any {
	d.t.Helper()
	var stdout, stderr bytes.Buffer
	stdio := cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ()}
	if !now.IsZero() {
		stdio.Now = func() time.Time { return now }
	}
	if code := cli.Main(d.t.Context(), []string{"runs", "status", id, "-c", d.eval, "--results", d.results, "--json"}, stdio); code != 0 {
		d.t.Fatalf("mst runs status %s exited %d\n%s", id, code, stderr.String())
	}
	var s map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		d.t.Fatalf("mst runs status --json: %v\n%s", err, stdout.String())
	}
	return s
}

// statusOrNil is the status of id, or nil where it cannot be read; it
// works in cleanups, once t.Context() has ended.
func (d *detached) statusOrNil(id string) map[string]any {
	var stdout bytes.Buffer
	if cli.Main(context.Background(), []string{"runs", "status", id, "-c", d.eval, "--results", d.results, "--json"}, cli.Stdio{Out: &stdout, Err: io.Discard, Env: os.Environ()}) != 0 {
		return nil
	}
	var s map[string]any
	if json.Unmarshal(stdout.Bytes(), &s) != nil {
		return nil
	}
	return s
}

// waitStatus waits until cond holds of the status, or the run ended
// without it.
func (d *detached) waitStatus(id, what string, cond func(map[string]any) bool) map[string]any {
	d.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s := d.status(id, time.Time{})
		if cond(s) {
			return s
		}
		if st := s["state"]; st == "done" || st == "failed" || st == "cancelled" {
			d.t.Fatalf("the detached run %s ended (%v) before %s: %v", id, st, what, s)
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("waited 3 minutes for %s; status: %v", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watch follows id with mst runs watch to its end, in this process.
func (d *detached) watch(id string) mstResult {
	d.t.Helper()
	return runCLI(d.t, "runs", "watch", id[len(id)-6:], "-c", d.eval, "--results", d.results, "--interval", "100ms")
}

// waitGone waits for the coordinator's process to end.
func (d *detached) waitGone(pid int) {
	d.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for syscall.Kill(pid, 0) == nil && !proctree.Ended(pid) {
		if time.Now().After(deadline) {
			d.t.Fatalf("the coordinator (process %d) is still there a minute after its run ended", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopAll stops the coordinators of every launch that has not ended, and
// everything they started, so nothing outlives the test.
func (d *detached) stopAll() {
	os.WriteFile(filepath.Join(d.marks, testserver.WakeFile), nil, 0o600)
	if d.w.cleanup != nil {
		d.w.cleanup(d)
	}
	for _, id := range d.launches {
		var s struct {
			PID     int    `json:"pid"`
			State   string `json:"state"`
			Machine string `json:"machine"`
		}
		data, _ := json.Marshal(d.statusOrNil(id))
		json.Unmarshal(data, &s)
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.PID))
		if s.PID > 0 && s.State != "done" && s.State != "failed" && s.State != "cancelled" && bytes.Contains(cmdline, []byte("coordinate")) {
			killTree(s.PID)
			// What a dead processes coordinator leaves: its folder.
			if strings.HasPrefix(s.Machine, filepath.Join(os.TempDir(), "mst-coordinator-")) {
				os.RemoveAll(s.Machine)
			}
		}
	}
	// Whatever the records say, no command of this test's coordinators
	// outlives it: their mst run names the test's folder.
	for _, pid := range allPIDs() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(cmdline, []byte("--config-dir\x00"+d.dir)) {
			continue
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 1 {
				var ppid int
				fmt.Sscanf(f[1], "%d", &ppid)
				if parent, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid)); bytes.Contains(parent, []byte("coordinate")) {
					killTree(ppid)
				}
			}
		}
		killTree(pid)
	}
	// A coordinator killed leaves its private secrets behind, as a machine
	// that dies would; this machine lives on.
	for _, p := range d.newShm() {
		os.RemoveAll(p)
	}
}

// killTree kills pid and every process under it at once, as a machine
// that dies does.
func killTree(pid int) {
	// The tree is read first; the coordinator goes first, so it cannot
	// write a word about the deaths of the others.
	pids := append([]int{pid}, proctree.Descendants(pid)...)
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// report reads the run's report with mst report URL --json.
func (d *detached) report(run string) map[string]any {
	d.t.Helper()
	r := runCLI(d.t, "report", keyURL(d.t, d.results, "team/detached/runs/"+run), "--json")
	if r.code != 0 {
		d.t.Fatalf("mst report %s exited %d\n%s", run, r.code, r.stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		d.t.Fatal(err)
	}
	return rep
}

func counts(rep map[string]any) map[string]any { m, _ := rep["counts"].(map[string]any); return m }

// noCanary checks that no object of the bucket holds the canary, in any
// form the redactor knows.
func (d *detached) noCanary() {
	d.t.Helper()
	for _, k := range listKeys(d.t, d.bucket, "") {
		data, err := d.bucket.ReadAll(d.t.Context(), k)
		if err != nil {
			d.t.Fatal(err)
		}
		if bytes.Contains(data, []byte(detachCanary)) || bytes.Contains(data, []byte("canary-detach")) {
			d.t.Errorf("the bucket's %s holds the secret", k)
		}
	}
}

// bundleOf is the bundle folder of the coordinator machine of a running
// status: where its detach.json is.
func (d *detached) bundleOf(status map[string]any) string {
	d.t.Helper()
	for p := range d.w.files(d.t, status) {
		if filepath.Base(p) == "detach.json" {
			return filepath.Dir(p)
		}
	}
	d.t.Fatalf("the coordinator machine of %v holds no detach.json", status["id"])
	return ""
}

// noMachinePaths checks that no object of the bucket quotes the
// coordinator machine's paths: its private secrets in /dev/shm, or its
// bundle folder.
func (d *detached) noMachinePaths(bundle string) {
	d.t.Helper()
	for _, k := range listKeys(d.t, d.bucket, "") {
		data, err := d.bucket.ReadAll(d.t.Context(), k)
		if err != nil {
			d.t.Fatal(err)
		}
		for _, p := range []string{"/dev/shm", bundle} {
			if bytes.Contains(data, []byte(p)) {
				d.t.Errorf("the bucket's %s quotes the coordinator machine's %s", k, p)
			}
		}
	}
}

var quickCases = map[string]string{
	"a":                     "Please echo 'one' back to me",
	"über-🦉":                "Please echo 'two' back to me",
	strings.Repeat("長", 60): "Please echo 'three' back to me",
}

func quickOrder() []string { return []string{"a", "über-🦉", strings.Repeat("長", 60)} }

// TestDetachProcesses launches a run with --detach on the processes
// runner and a bucket in the GCS emulator: the launching process exits at
// once, and a fresh one follows the run with mst runs watch to done. The
// run in the bucket is complete and graded, the records say what ran, the
// coordinator's folder and private secrets are gone once it ends, and the
// secret the server reads is nowhere in the bucket.
func TestDetachProcesses(t *testing.T) {
	d := newDetached(t, quickCases, quickOrder())
	shards := t.TempDir()
	id := d.launch("run", d.eval, "--results", d.results, "--runner", "processes", "--runner-option", "shards=2", "--runner-option", "dir="+shards)
	w := d.watch(id)
	if w.code != 0 {
		t.Fatalf("mst runs watch exited %d\nstdout:\n%s\nstderr:\n%s", w.code, w.stdout, w.stderr)
	}
	if !strings.Contains(w.stdout, "state      done") {
		t.Errorf("mst runs watch printed no done status:\n%s", w.stdout)
	}
	s := d.status(id, time.Time{})
	run, _ := s["run"].(string)
	if s["state"] != "done" || s["phase"] != "collect" || run == "" || s["collected"] != 6.0 || s["planned"] != 6.0 || s["graded"] != 6.0 {
		t.Errorf("status = %v; want done after collect, with its run, 6 of 6 collected and graded", s)
	}
	rep := d.report(run)
	if c := counts(rep); c["planned"] != 6.0 || c["answered"] != 6.0 {
		t.Errorf("the run's counts = %v; want 6 planned and answered", c)
	}
	d.waitGone(int(s["pid"].(float64)))
	if left, _ := filepath.Glob(filepath.Join(shards, "coordinator-*")); len(left) > 0 {
		t.Errorf("the coordinator's folder is left after its run: %v", left)
	}
	if left := d.newShm(); len(left) > 0 {
		t.Errorf("the coordinator's private secrets folder is left after its run: %v", left)
	}
	logs := runCLI(t, "runs", "logs", id, "-c", d.eval, "--results", d.results)
	if logs.code != 0 || !strings.Contains(logs.stdout, "the detached run is done") || !strings.Contains(logs.stdout, "collect: mst run") {
		t.Errorf("mst runs logs exited %d and printed:\n%s\n%s", logs.code, logs.stdout, logs.stderr)
	}
	list := runCLI(t, "runs", "list", "-c", d.eval, "--results", d.results)
	if list.code != 0 || !strings.Contains(list.stdout, id) || !strings.Contains(list.stdout, "done") {
		t.Errorf("mst runs list exited %d:\n%s\n%s", list.code, list.stdout, list.stderr)
	}
	d.noCanary()
}

// TestDetachCancel cancels a detached run on the processes runner while
// one of its trials is in flight (testDetachCancel).
func TestDetachCancel(t *testing.T) { testDetachCancel(t, processesWorld()) }

// TestDetachLost kills a detached run's coordinator on the processes
// runner mid-run, and finishes the run with a resume (testDetachLost).
func TestDetachLost(t *testing.T) { testDetachLost(t, processesWorld()) }

// detachWorld is a runner the detached tests run on: how a launch names
// it, which mst launches, where the eval's server is, and how the test
// reads, kills and clears away a coordinator machine of it.
type detachWorld struct {
	// runner are the --runner flags of a launch.
	runner []string
	// bin is the mst that launches; "" is this test binary, acting as mst.
	bin string
	// secrets are KEY=value lines added to the secrets file.
	secrets []string
	// server puts the test MCP server in dir and returns its path.
	server func(t *testing.T, dir string) string
	// noMarks is set where the server cannot leave its marks where the
	// test reads them (a read-only mount): a slow trial is then taken to
	// be in flight once the fast ones are collected, since the trials
	// start together (concurrency 4).
	noMarks bool
	// files reads the regular files of the coordinator machine of a
	// running status (its bundle and log), by path.
	files func(t *testing.T, status map[string]any) map[string][]byte
	// kill kills the coordinator machine of a running status, every
	// process of it at once, as a machine that dies.
	kill func(t *testing.T, status map[string]any)
	// start, when set, is called once the bucket's emulator runs at
	// emulator (HOST:PORT), before anything is launched.
	start func(t *testing.T, emulator string)
	// cleanup, when set, removes what the test's launches left behind,
	// before the processes are stopped.
	cleanup func(d *detached)
}

// processesWorld is the processes runner: the coordinator machine is a
// folder and processes of this machine.
func processesWorld() *detachWorld {
	return &detachWorld{
		runner: []string{"--runner", "processes"},
		server: testServerCommand,
		files: func(t *testing.T, s map[string]any) map[string][]byte {
			machine, _ := s["machine"].(string)
			if machine == "" {
				t.Fatal("the status names no coordinator machine")
			}
			return folderFiles(machine)
		},
		kill: func(t *testing.T, s map[string]any) { killTree(int(s["pid"].(float64))) },
	}
}

// folderFiles reads the regular files under dir, by path.
func folderFiles(dir string) map[string][]byte {
	files := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			files[p], _ = os.ReadFile(p)
		}
		return nil
	})
	return files
}

// inFlight says whether the slow trial has started.
func (d *detached) inFlight() bool {
	if d.w.noMarks {
		return true
	}
	ents, _ := os.ReadDir(d.marks)
	return len(ents) > 0
}

// testDetachCancel cancels a detached run while one of its trials is in
// flight: the coordinator interrupts its mst run as Ctrl-C would, starts
// nothing else, and the run keeps the trials it collected. While it runs,
// no process has the secret in its argv and the coordinator machine's
// files (the bundle, its log) do not hold it.
func testDetachCancel(t *testing.T, w *detachWorld) {
	cases := map[string]string{"a": quickCases["a"], "b": quickCases["über-🦉"], "slow": "sleep for 600 seconds please"}
	d := newDetachedOn(t, w, cases, []string{"a", "b", "slow"})
	id := d.launch(append([]string{"run", d.eval, "--results", d.results, "--variant", "v"}, w.runner...)...)
	running := d.waitStatus(id, "two trials collected and the slow one in flight", func(s map[string]any) bool {
		return s["collected"] == 2.0 && d.inFlight()
	})
	for _, pid := range allPIDs() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.Contains(cmdline, []byte(detachCanary)) {
			t.Errorf("process %d has the secret in its argv: %q", pid, cmdline)
		}
	}
	files := w.files(t, running)
	for p, data := range files {
		if bytes.Contains(data, []byte(detachCanary)) {
			t.Errorf("the coordinator machine's %s holds the secret", p)
		}
	}
	if len(files) < 4 {
		t.Errorf("the coordinator machine holds %d files; want the bundle and the log", len(files))
	}
	if r := runCLI(t, "runs", "cancel", id, "-c", d.eval, "--results", d.results); r.code != 0 {
		t.Fatalf("mst runs cancel exited %d\n%s", r.code, r.stderr)
	}
	w2 := d.watch(id)
	if w2.code != int(cli.ExitPartial) || !strings.Contains(w2.stderr, "was cancelled") {
		t.Fatalf("mst runs watch exited %d, want %d (cancelled)\n%s\n%s", w2.code, cli.ExitPartial, w2.stdout, w2.stderr)
	}
	s := d.status(id, time.Time{})
	cmds, _ := s["commands"].([]any)
	if s["state"] != "cancelled" || len(cmds) != 1 {
		t.Errorf("status = %v; want cancelled after one command", s)
	}
	rep := d.report(s["run"].(string))
	if c := counts(rep); c["planned"] != 3.0 || c["answered"] != 2.0 || c["cancelled"] != 1.0 {
		t.Errorf("the cancelled run's counts = %v; want 3 planned, 2 answered kept, 1 cancelled", c)
	}
	if r := runCLI(t, "runs", "cancel", id, "-c", d.eval, "--results", d.results); r.code != int(cli.ExitUsage) || !strings.Contains(r.stderr, "already ended") {
		t.Errorf("a second mst runs cancel exited %d: %s", r.code, r.stderr)
	}
	d.noCanary()
}

// testDetachLost kills the coordinator machine while a trial is in
// flight: its status stops, shows lost five minutes later (a fake clock),
// and mst run --resume RUN --detach finishes the run on a new coordinator.
func testDetachLost(t *testing.T, w *detachWorld) {
	cases := map[string]string{"a": quickCases["a"], "slow": "sleep for 600 seconds please"}
	d := newDetachedOn(t, w, cases, []string{"a", "slow"})
	id := d.launch(append([]string{"run", d.eval, "--results", d.results, "--variant", "v"}, w.runner...)...)
	s := d.waitStatus(id, "one trial collected and the slow one in flight", func(s map[string]any) bool {
		return s["collected"] == 1.0 && d.inFlight() && s["run"] != nil
	})
	bundle := d.bundleOf(s)
	w.kill(t, s)
	run := s["run"].(string)
	// Let the slow trial finish on the resume.
	os.WriteFile(filepath.Join(d.marks, testserver.WakeFile), nil, 0o600)
	updated, err := time.Parse(time.RFC3339Nano, d.status(id, time.Time{})["updated"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.status(id, updated.Add(4*time.Minute))["shown"]; got != "running" {
		t.Errorf("four minutes after its last heartbeat the run shows %v, want running", got)
	}
	if got := d.status(id, updated.Add(5*time.Minute+time.Second))["shown"]; got != "lost" {
		t.Errorf("five minutes after its last heartbeat the run shows %v, want lost", got)
	}
	var stdout, stderr bytes.Buffer
	later := func() time.Time { return updated.Add(6 * time.Minute) }
	code := cli.Main(t.Context(), []string{"runs", "watch", id, "-c", d.eval, "--results", d.results, "--interval", "10ms"}, cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ(), Now: later})
	hint := "mst run --resume " + run + " --results " + d.results + " --secrets-file YOUR-SECRETS-FILE --detach"
	if code != int(cli.ExitPartial) || !strings.Contains(stdout.String(), hint) || !strings.Contains(stderr.String(), hint) || !strings.Contains(stdout.String(), "not kept anywhere") {
		t.Fatalf("mst runs watch of a lost run exited %d, want %d with the hint %q:\n%s\n%s", code, cli.ExitPartial, hint, stdout.String(), stderr.String())
	}
	// The hint, pasted with a real secrets file, is the command that
	// finishes the run.
	pasted := strings.Fields(strings.ReplaceAll(hint, "YOUR-SECRETS-FILE", d.secrets))[1:]

	// The lock the killed mst run held lapses after its lease; until then
	// the resume is refused as busy, and says so.
	var again string
	deadline := time.Now().Add(time.Minute)
	for {
		args := append(append([]string(nil), pasted...), "--detach-heartbeat", "200ms")
		r := d.mst(args...)
		if r.code == 0 {
			again = strings.TrimSpace(r.stdout)
			d.launches = append(d.launches, again)
			break
		}
		if !strings.Contains(r.stderr, "in use by") || time.Now().After(deadline) {
			t.Fatalf("mst %v exited %d\n%s", args, r.code, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if w := d.watch(again); w.code != 0 {
		t.Fatalf("mst runs watch of the resume exited %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	s2 := d.status(again, time.Time{})
	if s2["run"] != run || s2["phase"] != "resume" {
		t.Errorf("the resume's status = %v; want run %s, phase resume", s2, run)
	}
	if c := counts(d.report(run)); c["planned"] != 2.0 || c["answered"] != 2.0 {
		t.Errorf("the resumed run's counts = %v; want 2 planned and answered", c)
	}
	d.noCanary()
	d.noMachinePaths(bundle)
}

// TestDetachRefusals: what a detached run cannot have is refused before
// any machine is made, each saying what to give instead.
func TestDetachRefusals(t *testing.T) {
	d := newDetached(t, quickCases, quickOrder())
	local := filepath.Join(d.dir, "local-results")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"local runner", []string{"run", d.eval, "--results", d.results}, "the runner local cannot make a coordinator machine"},
		// The eval names no store: its runs would go to the default folder.
		{"no result store", []string{"run", d.eval, "--runner", "processes"}, "the results go to the folder mst-results (the default, as neither --results nor the eval's results.store names a store) on this machine, which the coordinator machine cannot write and mst runs could not read once this machine is away: give --results gs://BUCKET/PREFIX or s3://BUCKET/PREFIX, or set results.store in the eval config"},
		{"folder store", []string{"run", d.eval, "--results", local, "--runner", "processes"}, "the results go to the folder"},
		{"file URL store", []string{"run", d.eval, "--results", "file://" + local, "--runner", "processes"}, "the results go to the folder"},
		{"grade without runner", []string{"grade", "some-run", "--results", d.results}, "give --runner NAME"},
		{"secret only in the environment", []string{"run", d.eval, "--results", d.results, "--runner", "processes", "--no-secrets"}, "SRV_TOKEN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(c.args, "--detach")
			if c.args[len(c.args)-1] == "--no-secrets" {
				args = append(c.args[:len(c.args)-1], "--detach")
				t.Setenv("SRV_TOKEN", detachCanary)
			} else {
				args = append(args, "--secrets-file", d.secrets)
			}
			r := d.mst(args...)
			if r.code != int(cli.ExitUsage) || !strings.Contains(r.stderr, c.want) {
				t.Errorf("mst %v exited %d, want %d saying %q:\n%s", args, r.code, cli.ExitUsage, c.want, r.stderr)
			}
			if strings.Contains(r.stderr, detachCanary) {
				t.Errorf("the refusal prints the secret")
			}
		})
	}
	// A connector server's grants live in the local credential store,
	// which the coordinator machine cannot share.
	connector := filepath.Join(d.dir, "connector.yaml")
	os.WriteFile(connector, []byte(`name: detached
datasets: [cases.jsonl]
servers:
  crm:
    url: http://127.0.0.1:9/mcp
    oauth: {}
variants:
  v: {model: offline, servers: [crm]}
`), 0o644)
	r := d.mst("run", connector, "--results", d.results, "--runner", "processes", "--detach", "--store-option", "dir="+filepath.Join(d.dir, "creds"))
	if r.code != int(cli.ExitUsage) || !strings.Contains(r.stderr, "the connector servers crm need their grants refreshed on the coordinator machine") || !strings.Contains(r.stderr, "give --store NAME of a shared store") {
		t.Errorf("a detached run with a connector server and the local store exited %d:\n%s", r.code, r.stderr)
	}
	// A model key set only in the launching shell is refused, truly: the
	// shell sets it, but only the secrets file goes to the coordinator.
	keyed := filepath.Join(d.dir, "keyed.yaml")
	os.WriteFile(keyed, []byte("name: detached\ndatasets: [cases.jsonl]\nservers:\n  crm: {url: \"http://127.0.0.1:9/mcp\"}\nvariants:\n  v: {model: anthropic/claude-test}\n"), 0o644)
	t.Setenv("ANTHROPIC_API_KEY", detachCanary)
	r = d.mst("run", keyed, "--results", d.results, "--runner", "processes", "--detach", "--secrets-file", d.secrets)
	if want := "this shell sets it, but a detached run (--detach) takes nothing of this machine's environment to its coordinator machine, only the secrets file: add a line ANTHROPIC_API_KEY=... to " + d.secrets; r.code != int(cli.ExitUsage) || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, detachCanary) {
		t.Errorf("a detached run whose key only the shell sets exited %d, want %d saying %q:\n%s", r.code, cli.ExitUsage, want, r.stderr)
	}
	if keys := listKeys(t, d.bucket, "team/detached/detached/"); len(keys) > 0 {
		t.Errorf("a refused launch left records: %v", keys)
	}
	for _, folder := range []string{local, filepath.Join(d.dir, "mst-results")} {
		if _, err := os.Stat(folder); err == nil {
			t.Errorf("a refused launch made the results folder %s", folder)
		}
	}
}

// allPIDs lists the processes of this machine.
func allPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// TestDetachGrade detaches a run that grades on a runner (--grade-runner):
// its coordinator collects with mst run --no-grade, then grades with mst
// grade --runner, two phases the status records; then a detached mst grade
// makes a second grade set.
func TestDetachGrade(t *testing.T) {
	d := newDetached(t, quickCases, quickOrder())
	id := d.launch("run", d.eval, "--results", d.results, "--runner", "processes", "--grade-runner", "processes", "--runner-option", "shards=2")
	if w := d.watch(id); w.code != 0 {
		t.Fatalf("mst runs watch exited %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	s := d.status(id, time.Time{})
	cmds, _ := s["commands"].([]any)
	if s["state"] != "done" || s["phase"] != "grade" || len(cmds) != 2 ||
		!strings.Contains(fmt.Sprint(cmds[0]), "mst run eval.yaml") || !strings.Contains(fmt.Sprint(cmds[0]), "--no-grade") ||
		!strings.Contains(fmt.Sprint(cmds[1]), "mst grade "+s["run"].(string)) || !strings.Contains(fmt.Sprint(cmds[1]), "--runner processes") {
		t.Fatalf("status = %v; want done after a collect without grades and a grade on processes", s)
	}
	if s["graded"] != 6.0 {
		t.Errorf("the grade phase graded %v trials, want 6", s["graded"])
	}
	run := s["run"].(string)
	again := d.launch("grade", run, "--results", d.results, "--runner", "processes")
	if w := d.watch(again); w.code != 0 {
		t.Fatalf("mst runs watch of the detached grade exited %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	g := d.status(again, time.Time{})
	if g["state"] != "done" || g["command"] != "grade" || g["run"] != run || g["gradeSet"] != "2" || g["graded"] != 6.0 {
		t.Errorf("the detached grade's status = %v; want done, grade set 2 of run %s, 6 graded", g, run)
	}
	d.noCanary()
}

// TestDetachResumedCounts kills the worker of a detached run while its
// slow trial is in flight: the first mst run ends partial, the coordinator
// resumes it by itself, and mst runs status and list count the whole
// run's trials across both steps (2 of 2), not the resume's own (1 of 1).
func TestDetachResumedCounts(t *testing.T) {
	cases := map[string]string{"a": quickCases["a"], "slow": "sleep for 600 seconds please"}
	d := newDetached(t, cases, []string{"a", "slow"})
	shards := t.TempDir()
	id := d.launch("run", d.eval, "--results", d.results, "--variant", "v", "--runner", "processes", "--runner-option", "dir="+shards)
	running := d.waitStatus(id, "one trial collected and the slow one in flight", func(s map[string]any) bool {
		return s["collected"] == 1.0 && d.inFlight()
	})
	bundle := d.bundleOf(running)
	killTree(workerPID(t, filepath.Join(shards, "shard-0")))
	// The resume's slow trial ends at once (the killed one could not).
	os.WriteFile(filepath.Join(d.marks, testserver.WakeFile), nil, 0o600)
	if w := d.watch(id); w.code != 0 {
		t.Fatalf("mst runs watch exited %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	s := d.status(id, time.Time{})
	cmds, _ := s["commands"].([]any)
	if s["state"] != "done" || s["phase"] != "resume" || len(cmds) != 2 || s["planned"] != 2.0 || s["collected"] != 2.0 || s["graded"] != 2.0 {
		t.Errorf("status = %v; want done after a collect and a resume, 2 of 2 collected and graded", s)
	}
	list := runCLI(t, "runs", "list", "-c", d.eval, "--results", d.results)
	if list.code != 0 || !strings.Contains(list.stdout, "2/2") {
		t.Errorf("mst runs list exited %d, want the run's 2/2:\n%s\n%s", list.code, list.stdout, list.stderr)
	}
	st := runCLI(t, "runs", "status", id, "-c", d.eval, "--results", d.results)
	if !strings.Contains(st.stdout, "2 collected, 2 graded, of 2") {
		t.Errorf("mst runs status does not count the whole run:\n%s", st.stdout)
	}
	d.noMachinePaths(bundle)
}

// TestDetachSharedDir: while a detached run on the processes runner uses
// a dir, a second launch with the same dir is refused at once (exit 2),
// naming the first and how to pick another folder, before it writes any
// record or makes any machine; once the first has ended, the dir is free.
func TestDetachSharedDir(t *testing.T) {
	cases := map[string]string{"a": quickCases["a"], "slow": "sleep for 600 seconds please"}
	d := newDetached(t, cases, []string{"a", "slow"})
	shards := t.TempDir()
	args := []string{"run", d.eval, "--results", d.results, "--variant", "v", "--runner", "processes", "--runner-option", "dir=" + shards}
	first := d.launch(args...)
	d.waitStatus(first, "the slow trial in flight", func(s map[string]any) bool { return d.inFlight() })
	r := d.mst(append(args, "--detach", "--secrets-file", d.secrets)...)
	if r.code != int(cli.ExitUsage) || !strings.Contains(r.stderr, "in use by the detached run "+first) || !strings.Contains(r.stderr, "--runner-option dir=ANOTHER-FOLDER") {
		t.Errorf("a second launch in the dir %s exited %d, want %d naming %s:\n%s", shards, r.code, cli.ExitUsage, first, r.stderr)
	}
	// Another eval's launch in the same dir is refused too: its records
	// are apart, but the dir's folders say who owns them.
	other := filepath.Join(d.dir, "other.yaml")
	cfg, _ := os.ReadFile(d.eval)
	os.WriteFile(other, bytes.Replace(cfg, []byte("name: detached"), []byte("name: other"), 1), 0o644)
	r = d.mst("run", other, "--results", d.results, "--variant", "v", "--runner", "processes", "--runner-option", "dir="+shards, "--detach", "--secrets-file", d.secrets)
	if r.code != int(cli.ExitUsage) || !strings.Contains(r.stderr, "is in use by the run ") || !strings.Contains(r.stderr, "--runner-option dir=ANOTHER-FOLDER") {
		t.Errorf("another eval's launch in the dir %s exited %d, want %d saying the dir is in use:\n%s", shards, r.code, cli.ExitUsage, r.stderr)
	}
	if keys := listKeys(t, d.bucket, "team/other/"); len(keys) > 0 {
		t.Errorf("the refused launch of another eval left %v", keys)
	}
	if keys := listKeys(t, d.bucket, "team/detached/detached/"); len(keys) > 0 {
		for _, k := range keys {
			if !strings.Contains(k, first) {
				t.Errorf("the refused launch left a record: %s", k)
			}
		}
	}
	os.WriteFile(filepath.Join(d.marks, testserver.WakeFile), nil, 0o600)
	if w := d.watch(first); w.code != 0 {
		t.Fatalf("mst runs watch of the first run exited %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	second := d.launch(args...)
	if w := d.watch(second); w.code != 0 {
		t.Fatalf("mst runs watch of the run launched once the dir was free exited %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
}

// TestDetachCleanupKilledCoordinator kills two detached runs'
// coordinators mid-run, as a machine that dies: mst runner cleanup finds
// and removes each one's folder (its bundle, config, datasets and log),
// by the run's id for one (in the temporary folder), by the detached
// run's id for the other (in the runner's dir).
func TestDetachCleanupKilledCoordinator(t *testing.T) {
	cases := map[string]string{"a": quickCases["a"], "slow": "sleep for 600 seconds please"}
	for _, byRun := range []bool{true, false} {
		name := map[bool]string{true: "by run id", false: "by detached id"}[byRun]
		t.Run(name, func(t *testing.T) {
			d := newDetached(t, cases, []string{"a", "slow"})
			args := []string{"run", d.eval, "--results", d.results, "--variant", "v", "--runner", "processes"}
			shards := t.TempDir()
			if !byRun {
				args = append(args, "--runner-option", "dir="+shards)
			}
			id := d.launch(args...)
			s := d.waitStatus(id, "the run named and the slow trial in flight", func(s map[string]any) bool { return s["run"] != nil && d.inFlight() })
			machine := s["machine"].(string)
			bundle := d.bundleOf(s)
			for _, f := range []string{"detach.json", "datasets.json", "eval.yaml", "log.txt"} {
				if _, err := os.Stat(filepath.Join(bundle, f)); err != nil {
					t.Fatalf("the coordinator's bundle lacks %s: %v", f, err)
				}
			}
			d.w.kill(t, s)
			d.waitGone(int(s["pid"].(float64)))
			cleanup := []string{"runner", "cleanup", id}
			if byRun {
				cleanup = []string{"runner", "cleanup", s["run"].(string)}
			} else {
				cleanup = append(cleanup, "--runner", "processes", "--runner-option", "dir="+shards)
			}
			r := runCLI(t, cleanup...)
			if r.code != 0 || !strings.Contains(r.stdout, machine) {
				t.Errorf("mst %v exited %d without listing the coordinator's folder %s:\n%s\n%s", cleanup, r.code, machine, r.stdout, r.stderr)
			}
			if _, err := os.Stat(machine); !os.IsNotExist(err) {
				t.Errorf("the killed coordinator's folder %s is still there after mst %v (%v)", machine, cleanup, err)
			}
		})
	}
}
