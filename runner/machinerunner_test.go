package runner_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// flakyMachine is a folder machine whose CopyFrom fails for one file: the
// first fails times (every time when fails is negative). With ctxBound set
// its copies also fail once their context has ended, as a copy made by a
// command (docker cp, scp) does.
type flakyMachine struct {
	runner.Machine
	suffix   string
	fails    int
	ctxBound bool

	mu    sync.Mutex
	tries map[string]int
}

// CopiesCheaply keeps these copies on CopyFrom: MachineRunner starts no
// file server for the machine.
func (m *flakyMachine) CopiesCheaply() bool { return true }

// remoteMachine is a folder machine as a remote one is seen: copies are
// not cheap, so MachineRunner brings transcripts back through `mst runner
// serve-files`; it counts the copies that still go through CopyFrom.
type remoteMachine struct {
	runner.Machine
	copies atomic.Int32
}

func (m *remoteMachine) CopyFrom(ctx context.Context, remote, local string) error {
	m.copies.Add(1)
	return m.Machine.CopyFrom(ctx, remote, local)
}

func (m *flakyMachine) CopyFrom(ctx context.Context, remote, local string) error {
	if m.ctxBound && ctx.Err() != nil {
		return ctx.Err()
	}
	m.mu.Lock()
	if m.tries == nil {
		m.tries = map[string]int{}
	}
	m.tries[remote]++
	n := m.tries[remote]
	m.mu.Unlock()
	if strings.HasSuffix(remote, m.suffix) && (m.fails < 0 || n <= m.fails) {
		return errors.New("the copy broke off")
	}
	return m.Machine.CopyFrom(ctx, remote, local)
}

func (m *flakyMachine) triesOf(suffix string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, n := range m.tries {
		if strings.HasSuffix(p, suffix) {
			return n
		}
	}
	return 0
}

// machineRunner returns a MachineRunner over processes-runner folders in
// dir, each machine passed through wrap.
func machineRunner(t *testing.T, dir, keep string, wrap func(runner.Machine) runner.Machine) runner.Runner {
	t.Helper()
	p := runner.Params{Options: map[string]string{"dir": dir}, MST: []string{mstBinary(t)}, Keep: keep, MSTVersion: testVersion, StopGrace: runnertest.StopGrace, Heartbeat: runnertest.Heartbeat}
	folders, err := runner.ProcessesDefinition().New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return runner.MachineRunner(func(ctx context.Context, i int) (runner.Machine, error) {
		m, err := runner.CreateProcessesMachine(ctx, folders, i)
		if err != nil {
			return nil, err
		}
		return wrap(m), nil
	}, p)
}

// testBundle is a one-variant bundle on the offline model with this test
// binary as the MCP server.
func testBundle(t *testing.T, serverArgs []string, prompts map[string]string, conc int) *shard.Bundle {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := servers.Server{Name: "test", Command: exe, Args: serverArgs, Env: map[string]string{runnertest.ServeEnv: "1"}}
	b := &shard.Bundle{
		Run:         transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "machinerunner-test", Variants: []string{"v"}, Trials: 1},
		Settings:    []shard.Setting{{Variant: "v", Client: "api", Model: "offline", Provider: "offline", Servers: []servers.Server{srv}}},
		Concurrency: conc,
	}
	for _, id := range slices.Sorted(maps.Keys(prompts)) {
		b.Cases = append(b.Cases, dataset.Case{ID: id, Input: prompts[id]})
		b.Add(shard.Planned{Key: transcript.Key{Case: id, Variant: "v", Trial: 1}})
	}
	return b
}

// served is a shard served by a real coordinator, whose fetched
// transcripts land in a run folder.
type served struct {
	results *store.DirRun
	res     shard.ShardResult
}

func (e *served) Trial(shardIndex int, m *protocol.Trial, data []byte) {
	if tr, err := transcript.Decode(data); err == nil {
		e.results.WriteTranscript(context.Background(), tr)
	}
}

// shardOf writes b to a folder and returns the shard that serves it with a
// coordinator, its input passed through wrap when wrap is not nil.
func shardOf(t *testing.T, b *shard.Bundle, wrap func(io.Reader) io.Reader) (runner.Shard, *served) {
	t.Helper()
	dir := t.TempDir()
	if err := shard.WriteBundle(dir, b); err != nil {
		t.Fatal(err)
	}
	sv := &served{results: store.OpenDir(t.TempDir(), nil)}
	coord := &shard.Coordinator{MSTVersion: testVersion, Events: sv, Logger: slog.New(slog.DiscardHandler), Secrets: secrets.New()}
	return runner.Shard{
		Index: b.Shard, Run: b.Run.ID, Attempt: 1, BundleDir: dir,
		Serve: func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
			if wrap != nil {
				in = wrap(in)
			}
			var err error
			sv.res, err = coord.Serve(ctx, b.Shard, in, out, shard.Fetch(fetch))
			return err
		},
	}, sv
}

// statuses reads the status of every transcript in the run folder, by
// case.
func statuses(t *testing.T, results store.Run) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := results.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		out[tr.Case] = tr.Outcome.Status
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

var echoes = map[string]string{
	"c1": "Please echo 'one'",
	"c2": "Please echo 'two'",
	"c3": "Please echo 'three'",
}

// TestCopyBackFailsOnce: a transcript whose first copy back fails is
// copied again and arrives.
func TestCopyBackFailsOnce(t *testing.T) {
	t.Parallel()
	var flaky *flakyMachine
	r := machineRunner(t, t.TempDir(), runner.KeepNever, func(m runner.Machine) runner.Machine {
		flaky = &flakyMachine{Machine: m, suffix: "/c2.t1.json", fails: 1}
		return flaky
	})
	s, sv := shardOf(t, testBundle(t, nil, echoes, 2), nil)
	if _, err := r.RunShard(t.Context(), s); err != nil {
		t.Fatalf("RunShard = %v", err)
	}
	want := map[string]string{"c1": transcript.Answered, "c2": transcript.Answered, "c3": transcript.Answered}
	if diff := cmp.Diff(want, statuses(t, sv.results)); diff != "" {
		t.Errorf("transcripts after one failed copy (-want +got):\n%s", diff)
	}
	if n := flaky.triesOf("/c2.t1.json"); n != 2 {
		t.Errorf("copies of c2's transcript = %d, want 2 (one failed, one retried)", n)
	}
}

// TestCopyBackServed: a machine whose copies are costly gets its
// transcripts back through one file server per shard, none by CopyFrom.
func TestCopyBackServed(t *testing.T) {
	t.Parallel()
	var rm *remoteMachine
	r := machineRunner(t, t.TempDir(), runner.KeepNever, func(m runner.Machine) runner.Machine {
		rm = &remoteMachine{Machine: m}
		return rm
	})
	s, sv := shardOf(t, testBundle(t, nil, echoes, 2), nil)
	if _, err := r.RunShard(t.Context(), s); err != nil {
		t.Fatalf("RunShard = %v", err)
	}
	want := map[string]string{"c1": transcript.Answered, "c2": transcript.Answered, "c3": transcript.Answered}
	if diff := cmp.Diff(want, statuses(t, sv.results)); diff != "" {
		t.Errorf("transcripts through the file server (-want +got):\n%s", diff)
	}
	if n := rm.copies.Load(); n != 0 {
		t.Errorf("%d transcripts came back by CopyFrom, want every one through the file server", n)
	}
}

// TestCopyBackFailsAlways: a transcript that cannot be copied back stays
// missing; the others arrive and the shard still ends cleanly.
func TestCopyBackFailsAlways(t *testing.T) {
	t.Parallel()
	r := machineRunner(t, t.TempDir(), runner.KeepNever, func(m runner.Machine) runner.Machine {
		return &flakyMachine{Machine: m, suffix: "/c2.t1.json", fails: -1}
	})
	s, sv := shardOf(t, testBundle(t, nil, echoes, 2), nil)
	if _, err := r.RunShard(t.Context(), s); err != nil {
		t.Fatalf("RunShard = %v", err)
	}
	if sv.res.Done == nil {
		t.Fatal("no done message")
	}
	want := map[string]string{"c1": transcript.Answered, "c3": transcript.Answered}
	if diff := cmp.Diff(want, statuses(t, sv.results)); diff != "" {
		t.Errorf("transcripts when one cannot be copied (-want +got):\n%s", diff)
	}
}

// TestCopyBackAfterCancel: after a cancel, the transcripts of the trials it
// cancelled are still copied back, even by a channel whose copies end with
// their context.
func TestCopyBackAfterCancel(t *testing.T) {
	t.Parallel()
	r := machineRunner(t, t.TempDir(), runner.KeepNever, func(m runner.Machine) runner.Machine {
		return &flakyMachine{Machine: m, ctxBound: true}
	})
	b := testBundle(t, nil, map[string]string{"a-first": "Please echo 'early'", "b-nap": "sleep for 300 seconds please"}, 2)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, sv := shardOf(t, b, func(in io.Reader) io.Reader { return watchHeartbeat(in, "a-first", cancel) })
	if _, err := r.RunShard(ctx, s); err != nil {
		t.Fatalf("RunShard = %v", err)
	}
	want := map[string]string{"a-first": transcript.Answered, "b-nap": transcript.Cancelled}
	if diff := cmp.Diff(want, statuses(t, sv.results)); diff != "" {
		t.Errorf("transcripts after a cancel (-want +got):\n%s", diff)
	}
}

// watchHeartbeat passes a worker's stdout through and calls cancel at the
// first heartbeat with a trial in flight after the trial of case first was
// reported: the one left in flight can then only end cancelled.
func watchHeartbeat(in io.Reader, first string, cancel func()) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		s := bufio.NewScanner(io.TeeReader(in, pw))
		seen := false
		for s.Scan() {
			var m struct {
				Type     string         `json:"type"`
				Key      transcript.Key `json:"key"`
				InFlight int            `json:"inFlight"`
			}
			json.Unmarshal(s.Bytes(), &m)
			switch {
			case m.Type == protocol.TypeTrial && m.Key.Case == first:
				seen = true
			case m.Type == protocol.TypeHeartbeat && seen && m.InFlight > 0:
				cancel()
			}
		}
		pw.CloseWithError(s.Err())
	}()
	return pr
}

// TestKeep: the keep policy decides which shard folders survive.
func TestKeep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		keep     string
		failing  bool
		wantKept bool
	}{
		{runner.KeepNever, false, false},
		{runner.KeepNever, true, false},
		{runner.KeepFailed, false, false},
		{runner.KeepFailed, true, true},
		{runner.KeepAlways, false, true},
	}
	for _, tt := range tests {
		name := tt.keep
		if tt.failing {
			name += "/failing"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := machineRunner(t, dir, tt.keep, func(m runner.Machine) runner.Machine { return m })
			var args []string
			if tt.failing {
				args = []string{"--fail-start"}
			}
			s, _ := shardOf(t, testBundle(t, args, map[string]string{"c": "Please echo 'x'"}, 1), nil)
			_, err := r.RunShard(t.Context(), s)
			if (err != nil) != tt.failing {
				t.Fatalf("RunShard = %v, want an error: %v", err, tt.failing)
			}
			_, statErr := os.Stat(filepath.Join(dir, "shard-0", "bundle"))
			if kept := statErr == nil; kept != tt.wantKept {
				t.Errorf("keep=%s, shard failed %v: machine kept = %v, want %v", tt.keep, tt.failing, kept, tt.wantKept)
			}
		})
	}
}
