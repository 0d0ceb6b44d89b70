package detach_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/engine/detach"
)

func records(t *testing.T) *detach.Records {
	t.Helper()
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	u, _ := url.Parse("mem://bucket/team")
	return detach.NewRecords(blobstore.New(b, u, blobstore.Options{}), "über eval")
}

func TestShown(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		state string
		age   time.Duration
		want  string
	}{
		{detach.StateRunning, time.Minute, detach.StateRunning},
		{detach.StateRunning, detach.LostAfter, detach.StateRunning},
		{detach.StateRunning, detach.LostAfter + time.Second, detach.StateLost},
		{detach.StateStarting, time.Hour, detach.StateLost},
		{detach.StateDone, 48 * time.Hour, detach.StateDone},
		{detach.StateFailed, 48 * time.Hour, detach.StateFailed},
		{detach.StateCancelled, 48 * time.Hour, detach.StateCancelled},
	} {
		s := detach.Status{State: c.state, Updated: now.Add(-c.age)}
		if got := s.Shown(now); got != c.want {
			t.Errorf("%s, last written %s ago, shows %s; want %s", c.state, c.age, got, c.want)
		}
	}
}

// TestRecords writes, lists and finds detached runs, Unicode and long ids
// among them, by their whole id and by their last characters.
func TestRecords(t *testing.T) {
	ctx := context.Background()
	r := records(t)
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ids := []string{"e-20261201-120000-4f2a9c", "e-20261201-130000-77aa9c", "é-🦉-" + strings.Repeat("長", 40) + "-d0d0d0"}
	for i, id := range ids {
		if err := r.WriteStatus(ctx, detach.Status{ID: id, State: detach.StateRunning, Launched: base.Add(time.Duration(i) * time.Hour), Updated: base}); err != nil {
			t.Fatal(err)
		}
	}
	list, bad, err := r.List(ctx)
	if err != nil || len(bad) > 0 || len(list) != 3 {
		t.Fatalf("List = %d runs, bad %v, %v", len(list), bad, err)
	}
	if list[0].ID != ids[2] || list[2].ID != ids[0] {
		t.Errorf("List is not newest first: %s, %s, %s", list[0].ID, list[1].ID, list[2].ID)
	}
	for ref, want := range map[string]string{ids[0]: ids[0], "4f2a9c": ids[0], "77aa9c": ids[1], "d0d0d0": ids[2], "0-77aa9c": ids[1]} {
		if got, err := r.Resolve(ctx, ref); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for ref, msg := range map[string]string{"a9c": "at least its last six", "2a9cxx": "no detached run", "../x": "not a detached run's id"} {
		if _, err := r.Resolve(ctx, ref); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("Resolve(%q) = %v; want an error saying %q", ref, err, msg)
		}
	}
	// Two runs ending alike: the id must say more.
	r.WriteStatus(ctx, detach.Status{ID: "f-20261201-140000-4f2a9c", State: detach.StateDone})
	if _, err := r.Resolve(ctx, "4f2a9c"); err == nil || !strings.Contains(err.Error(), "names 2 detached runs") {
		t.Errorf("Resolve of an ambiguous suffix = %v", err)
	}
	if ok, _ := r.Cancelled(ctx, ids[1]); ok {
		t.Error("a run is cancelled before anyone cancelled it")
	}
	r.Cancel(ctx, ids[1], "test")
	if ok, _ := r.Cancelled(ctx, ids[1]); !ok {
		t.Error("the cancel marker is not seen")
	}
	if _, err := r.ReadLog(ctx, ids[1]); err == nil || !strings.Contains(err.Error(), "no such detached run") {
		t.Errorf("ReadLog before any upload = %v", err)
	}
	r.WriteLog(ctx, ids[1], []byte("line\n"))
	if b, err := r.ReadLog(ctx, ids[1]); err != nil || string(b) != "line\n" {
		t.Errorf("ReadLog = %q, %v", b, err)
	}
	if !strings.HasPrefix(r.Where(ids[0]), "mem://bucket/team/") || !strings.Contains(r.Where(ids[0]), "/detached/"+ids[0]+"/") {
		t.Errorf("Where = %s", r.Where(ids[0]))
	}
}

// fakeMST writes a program that acts as mst for the coordinator: each
// call appends its arguments to calls.txt, reports progress, runs the
// shell command first on the first call, and exits with the next code of
// codes.
func fakeMST(t *testing.T, dir, first string, codes ...int) string {
	t.Helper()
	var script strings.Builder
	script.WriteString("#!/bin/sh\nd=" + dir + "\n")
	script.WriteString(`echo "$*" >> "$d/calls.txt"
n=$(wc -l < "$d/calls.txt")
prog=""; prev=""
for a in "$@"; do [ "$prev" = "--progress-file" ] && prog="$a"; prev="$a"; done
printf '{"run":"the-run","planned":4,"collected":%d,"graded":%d}' $n $n > "$prog"
echo "call $n"
`)
	if first != "" {
		script.WriteString("if [ $n = 1 ]; then " + first + "; fi\n")
	}
	script.WriteString("case $n in\n")
	for i, c := range codes {
		fmt.Fprintf(&script, "%d) exit %d;;\n", i+1, c)
	}
	script.WriteString("esac\nexit 99\n")
	p := filepath.Join(dir, "mst")
	if err := os.WriteFile(p, []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func coordinator(t *testing.T, spec detach.Spec, codes ...int) (*detach.Coordinator, *detach.Records, string) {
	t.Helper()
	spec.Heartbeat = detach.Duration(10 * time.Millisecond)
	co, r := coordinatorWith(t, spec, records(t), t.TempDir(), "", codes...)
	return co, r, co.Dir
}

// coordinatorWith is a coordinator of spec in the folder dir, whose fake
// mst runs first on its first call, keeping its records in r.
func coordinatorWith(t *testing.T, spec detach.Spec, r *detach.Records, dir, first string, codes ...int) (*detach.Coordinator, *detach.Records) {
	t.Helper()
	spec.ID, spec.Eval, spec.Config, spec.Results = "e-1-abcdef", "über eval", "eval.yaml", "mem://bucket/team"
	spec.MST = []string{fakeMST(t, dir, first, codes...)}
	spec.Deadline = time.Now().Add(time.Hour)
	logPath := filepath.Join(dir, "log.txt")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return &detach.Coordinator{Spec: &spec, Dir: dir, Records: r, Log: log, LogPath: logPath, Env: os.Environ(), SecretsFile: "/dev/shm/x/secrets.env"}, r
}

// TestCoordinatorSteps runs the coordinator's commands against a fake mst:
// a partial run is resumed once, and once only; a run that grades on a
// runner is collected without grades, then graded; an exit that means the
// run answered (4, 5) is done; anything else fails; a cancel written
// before the start runs nothing.
func TestCoordinatorSteps(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   detach.Spec
		codes  []int
		cancel bool
		state  string
		calls  []string
	}{
		{"done", detach.Spec{Command: detach.CommandRun, Runner: "docker"}, []int{0}, false, detach.StateDone, []string{"run /"}},
		{"partial, resumed", detach.Spec{Command: detach.CommandRun, Runner: "docker"}, []int{3, 0}, false, detach.StateDone, []string{"run /", "--runner docker --resume the-run"}},
		{"partial twice", detach.Spec{Command: detach.CommandRun, Runner: "docker"}, []int{3, 3}, false, detach.StateFailed, []string{"run", "--resume the-run"}},
		{"gate failed", detach.Spec{Command: detach.CommandRun, Runner: "docker"}, []int{5}, false, detach.StateDone, []string{"run"}},
		{"failed", detach.Spec{Command: detach.CommandRun, Runner: "docker"}, []int{1}, false, detach.StateFailed, []string{"run"}},
		{"grade runner", detach.Spec{Command: detach.CommandRun, Runner: "docker", GradeRunner: "docker"}, []int{0, 0}, false, detach.StateDone, []string{"run /", "grade the-run"}},
		{"grade", detach.Spec{Command: detach.CommandGrade, Runner: "ssh", Resume: "r1", GradeSet: "2"}, []int{0}, false, detach.StateDone, []string{"grade r1"}},
		{"cancelled first", detach.Spec{Command: detach.CommandRun, Runner: "docker"}, []int{0}, true, detach.StateCancelled, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			co, r, dir := coordinator(t, c.spec, c.codes...)
			ctx := context.Background()
			if c.cancel {
				r.Cancel(ctx, co.Spec.ID, "test")
			}
			s := runToEnd(t, co, r)
			if s.State != c.state || s.Ended == nil {
				t.Errorf("state %s (ended %v), error %q; want %s", s.State, s.Ended, s.Error, c.state)
			}
			data, _ := os.ReadFile(filepath.Join(dir, "calls.txt"))
			calls := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(data) == 0 {
				calls = nil
			}
			if len(calls) != len(c.calls) {
				t.Fatalf("calls:\n%s\nwant %d", data, len(c.calls))
			}
			for i, want := range c.calls {
				if !strings.Contains(calls[i], want) {
					t.Errorf("call %d = %s; want it to hold %q", i+1, calls[i], want)
				}
				if !strings.Contains(calls[i], "--secrets-file /dev/shm/x/secrets.env") || !strings.Contains(calls[i], "--loaded-datasets") {
					t.Errorf("call %d lacks the secrets file or the loaded datasets: %s", i+1, calls[i])
				}
			}
			if c.spec.GradeRunner != "" && !strings.Contains(calls[0], "--no-grade") {
				t.Errorf("a run graded on a runner is collected with grades: %s", calls[0])
			}
			if c.spec.GradeSet != "" && !strings.Contains(calls[0], "--resume "+c.spec.GradeSet) {
				t.Errorf("the grade set to finish is not passed on: %s", calls[0])
			}
			if len(c.calls) > 0 && (s.Run != "the-run" && c.spec.Resume == "") {
				t.Errorf("the status names run %q, want the one the command reported", s.Run)
			}
			for _, shown := range s.Commands {
				if strings.Contains(shown, "/dev/shm") {
					t.Errorf("the status shows the secrets file's path: %s", shown)
				}
			}
			log, err := r.ReadLog(ctx, co.Spec.ID)
			if err != nil || !bytes.Contains(log, []byte("the detached run is "+c.state)) {
				t.Errorf("the uploaded log (%v) ends without the run's end:\n%s", err, log)
			}
		})
	}
}

// TestCoordinatorCancelBetweenCommands writes the cancel marker while the
// first mst run is under way, long before the next heartbeat would see it:
// the run is partial, and the resume that would follow must not start,
// since the coordinator reads the marker before each command.
func TestCoordinatorCancelBetweenCommands(t *testing.T) {
	ctx := context.Background()
	store := t.TempDir()
	b, err := fileblob.OpenBucket(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	u, _ := url.Parse("file://" + store)
	r := detach.NewRecords(blobstore.New(b, u, blobstore.Options{}), "über eval")
	dir := t.TempDir()
	// The marker is written through the records, to learn where it goes,
	// then moved aside; the fake mst's first call puts it back.
	r.Cancel(ctx, "e-1-abcdef", "test")
	var marker string
	filepath.WalkDir(store, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "cancel" {
			marker = p
		}
		return nil
	})
	if marker == "" {
		t.Fatal("the cancel marker is not a file of the bucket's folder")
	}
	aside := filepath.Join(dir, "cancel-aside")
	if err := os.Rename(marker, aside); err != nil {
		t.Fatal(err)
	}
	spec := detach.Spec{Command: detach.CommandRun, Runner: "docker", Heartbeat: detach.Duration(time.Hour)}
	co, _ := coordinatorWith(t, spec, r, dir, fmt.Sprintf("mv '%s' '%s'", aside, marker), 3, 0)
	s := runToEnd(t, co, r)
	data, _ := os.ReadFile(filepath.Join(dir, "calls.txt"))
	if calls := strings.Count(string(data), "\n"); calls != 1 || s.State != detach.StateCancelled || !s.Cancelling {
		t.Errorf("cancelled during the first command: %d commands ran, state %s (cancelling %v); want 1, cancelled\n%s", calls, s.State, s.Cancelling, data)
	}
}

// runToEnd starts co, runs it to its end and returns the status it left.
func runToEnd(t *testing.T, co *detach.Coordinator, r *detach.Records) detach.Status {
	t.Helper()
	ctx := context.Background()
	if err := co.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := co.Run(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := r.ReadStatus(ctx, co.Spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCoordinatorRecordsRunAtOnce: the run's id reaches the store as soon
// as the command reports it, long before the next heartbeat (an hour
// away), so a coordinator lost early still says which run to resume; the
// hint of a run still partial after its resume is a whole command.
func TestCoordinatorRecordsRunAtOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gate := filepath.Join(dir, "go-on")
	spec := detach.Spec{Command: detach.CommandRun, Runner: "docker", Heartbeat: detach.Duration(time.Hour)}
	co, r := coordinatorWith(t, spec, records(t), dir, fmt.Sprintf("while [ ! -e '%s' ]; do sleep 0.05; done", gate), 3, 3)
	if err := co.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := r.ReadStatus(ctx, co.Spec.ID)
		if err == nil && s.Run == "the-run" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the command reported its run, the status names run %q", s.Run)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.WriteFile(gate, nil, 0o600)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, _ := r.ReadStatus(ctx, co.Spec.ID)
	want := "mst run --resume the-run --results mem://bucket/team --secrets-file YOUR-SECRETS-FILE --detach"
	if s.State != detach.StateFailed || !strings.Contains(s.Error, want) || !strings.Contains(s.Error, "not kept anywhere") || s.Results != "mem://bucket/team" {
		t.Errorf("status = %s, %q (results %q); want failed, saying %q", s.State, s.Error, s.Results, want)
	}
}

// TestCoordinatorScrubsPaths: whatever the commands print, and whatever
// error ends the run, the status and log in the store never quote the
// coordinator machine's paths (its private secrets file in /dev/shm, its
// bundle folder); they name them by what they are.
func TestCoordinatorScrubsPaths(t *testing.T) {
	for _, c := range []struct {
		name  string
		first string
		// broken makes the fake mst a file that cannot run.
		broken bool
	}{
		{"a command prints the paths", `echo "error: $*"; echo "open /dev/shm/mst-secrets-123/secrets.env: denied" >&2; exit 1`, false},
		{"the command cannot start", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			spec := detach.Spec{Command: detach.CommandRun, Runner: "docker", Heartbeat: detach.Duration(10 * time.Millisecond)}
			co, r := coordinatorWith(t, spec, records(t), dir, c.first, 1)
			if c.broken {
				os.Chmod(co.Spec.MST[0], 0o600)
			}
			s := runToEnd(t, co, r)
			if s.State != detach.StateFailed {
				t.Fatalf("state %s, want failed", s.State)
			}
			log, err := r.ReadLog(ctx, co.Spec.ID)
			if err != nil {
				t.Fatal(err)
			}
			stored := fmt.Sprintf("%s\n%q\n%q\n%s", s.Error, s.Commands, s.LastLines, log)
			for _, p := range []string{"/dev/shm", dir} {
				if strings.Contains(stored, p) {
					t.Errorf("the store quotes the coordinator machine's %s:\n%s", p, stored)
				}
			}
			if !strings.Contains(stored, detach.SecretsFileText) && !strings.Contains(stored, detach.BundleText) {
				t.Errorf("the store does not say what the paths were:\n%s", stored)
			}
		})
	}
}

// TestResumeHintStore: a detached run launched with a credential store
// other than the default says to give it again when resumed.
func TestResumeHintStore(t *testing.T) {
	s := detach.Status{Run: "r1", Results: "gs://b/team", Store: "bucket", StoreOptions: []string{"url=gs://b/team/.mst-credentials"}}
	want := "mst run --resume r1 --results gs://b/team --store bucket --store-option url=gs://b/team/.mst-credentials --secrets-file YOUR-SECRETS-FILE --detach"
	if got := s.ResumeHint(); !strings.HasPrefix(got, want) {
		t.Errorf("ResumeHint() = %q, want it to start %q", got, want)
	}
	s.Store, s.StoreOptions = "", nil
	if got := s.ResumeHint(); strings.Contains(got, "--store") {
		t.Errorf("ResumeHint() without a store = %q", got)
	}
}
