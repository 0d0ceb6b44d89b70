package shard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/testkit/testbin"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Clean()
	os.Exit(code)
}

// callerClient is a client that takes MST's proxy and, for each trial,
// calls the sleep tool of its first server once through the trial's proxy,
// for ten minutes: the call ends when the test closes the trial's case's
// channel in end (or the trial ends). Each call that returned is sent on
// ended.
type callerClient struct {
	end   map[string]chan struct{}
	ended chan error
}

func (c *callerClient) definition() *client.Definition {
	return &client.Definition{
		Name: "caller", Description: "calls the sleep tool once per trial, through MST's proxy", ProxiedServers: true,
		Options: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		Open: func(ctx context.Context, p client.OpenParams) (client.Session, error) {
			return &callerSession{c: c, p: p}, nil
		},
	}
}

type callerSession struct {
	c *callerClient
	p client.OpenParams
}

func (s *callerSession) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	srv := s.p.TrialServers(t)
	if len(srv) == 0 {
		return client.Result{}, errors.New("the trial has no servers")
	}
	conn, err := servers.Connect(ctx, srv[0])
	if err != nil {
		return client.Result{}, err
	}
	defer conn.Close()
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.c.end[t.Key.Case]:
			cancel()
		case <-callCtx.Done():
		}
	}()
	_, err = conn.Call(callCtx, "sleep", json.RawMessage(`{"seconds":600}`))
	s.c.ended <- err
	return client.Result{Answer: "slept", Outcome: transcript.Outcome{Status: transcript.Answered}}, nil
}

func (s *callerSession) Reset(context.Context) error { return nil }
func (s *callerSession) Close() error                { return nil }

// wireLog keeps the call messages of every shard, in one order: each
// worker line as the worker writes it, each coordinator line as the
// coordinator writes it (each Write is one whole line).
type wireLog struct {
	mu    sync.Mutex
	lines []any
}

type wireTap struct {
	log *wireLog
	w   io.Writer
}

func (t wireTap) Write(p []byte) (int, error) {
	if m, err := protocol.Decode(p); err == nil {
		switch m.(type) {
		case *protocol.AcquireCall, *protocol.CallGranted, *protocol.ReleaseCall:
			t.log.mu.Lock()
			t.log.lines = append(t.log.lines, m)
			t.log.mu.Unlock()
		}
	}
	return t.w.Write(p)
}

// counts returns the call acquires, grants and releases logged so far,
// and the most grants outstanding (granted, not released) at any point of
// the log.
func (l *wireLog) counts() (acquires, grants, releases, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.lines {
		switch m := m.(type) {
		case *protocol.AcquireCall:
			acquires++
		case *protocol.CallGranted:
			if m.Refused == "" {
				grants++
			}
		case *protocol.ReleaseCall:
			releases++
		}
		most = max(most, grants-releases)
	}
	return
}

// runTapped is runPipes with both directions logged in log.
func runTapped(ctx context.Context, w *shard.Worker, b *shard.Bundle, coord *shard.Coordinator, log *wireLog) (shard.ShardResult, error) {
	toWorker, fromCoordinator := io.Pipe()
	fromWorker, toCoordinator := io.Pipe()
	workerErr := make(chan error, 1)
	go func() {
		err := w.Run(context.WithoutCancel(ctx), b, toWorker, wireTap{log, toCoordinator})
		toCoordinator.Close()
		toWorker.Close()
		workerErr <- err
	}()
	res, err := coord.Serve(ctx, b.Shard, fromWorker, wireTap{log, fromCoordinator}, nil)
	fromCoordinator.Close()
	go io.Copy(io.Discard, fromWorker)
	if werr := <-workerErr; err == nil && werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = werr
	}
	return res, err
}

// callBundle is shard index's bundle: perShard trials of variant v, each
// one call of the test server "slow", whose calls the eval caps at limit.
// Each case has a setting of its own, whose server marks its calls in
// the folder markDir/CASE, so the test knows which trials' calls reached
// the server.
func callBundle(index, perShard, limit int, command, markDir string) *shard.Bundle {
	b := &shard.Bundle{Run: transcript.Run{ID: "r"}, Shard: index, Concurrency: perShard}
	for i := range perShard {
		id := fmt.Sprintf("s%d-c%d", index, i)
		srv := servers.Server{Name: "slow", Command: command, Args: []string{"--mark", filepath.Join(markDir, id)}}
		b.Settings = append(b.Settings, shard.Setting{Variant: "v", Client: "caller", Model: "m", Servers: []servers.Server{srv}, CallLimits: map[string]int{"slow": limit}})
		b.Cases = append(b.Cases, dataset.Case{ID: id, Input: "sleep"})
		b.Add(shard.Planned{Key: transcript.Key{Case: id, Variant: "v", Trial: 1}, Setting: i})
	}
	return b
}

// marked returns the cases whose calls reached the test server: those
// whose mark folder holds a mark file.
func marked(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", "sleep-*"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, f := range m {
		cases = append(cases, filepath.Base(filepath.Dir(f)))
	}
	slices.Sort(cases)
	return slices.Compact(cases)
}

// marks counts the test server's mark files: one per sleep call that
// reached it.
func marks(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", "sleep-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// waitFor polls cond (a look at files and logged lines, which give no
// event of their own) until it holds, failing the test when fail returns
// a reason first or after a minute.
func waitFor(t *testing.T, what string, cond func() bool, fail func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if why := fail(); why != "" {
			t.Fatalf("waiting for %s: %s", what, why)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCallLimitAcrossShards runs two real workers against one coordinator
// whose limiter caps the calls of server "slow" at 2. Each worker runs 3
// trials at once, each making one sleep call that lasts until the test
// ends it, through the worker's MCP proxy to a real test server. Across
// both shards, 2 calls reach the server and the other 4 wait at the
// coordinator; each call the test ends gives its place to a waiting one,
// and at no point of the wire are more than 2 call places held.
func TestCallLimitAcrossShards(t *testing.T) {
	t.Parallel()
	const limit, perShard = 2, 3
	dir, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	markDir := t.TempDir()
	command := testbin.Path(dir, testbin.TestServer)
	bundles := []*shard.Bundle{callBundle(0, perShard, limit, command, markDir), callBundle(1, perShard, limit, command, markDir)}
	cl := &callerClient{end: map[string]chan struct{}{}, ended: make(chan error, 2*perShard)}
	for _, b := range bundles {
		for _, c := range b.Cases {
			cl.end[c.ID] = make(chan struct{})
			if err := os.Mkdir(filepath.Join(markDir, c.ID), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil).WithServerCalls(map[string]int{"slow": limit}), Logger: discardLogger(), Bundles: bundles}
	log := &wireLog{}
	type result struct {
		res shard.ShardResult
		err error
	}
	results := make(chan result, len(bundles))
	var running sync.WaitGroup
	for _, b := range bundles {
		w := &shard.Worker{Clients: client.NewRegistry(cl.definition()), Results: store.OpenDir(t.TempDir(), nil), Logger: discardLogger(), MSTVersion: "test", WorkDir: t.TempDir()}
		running.Go(func() {
			res, err := runTapped(t.Context(), w, b, coord, log)
			results <- result{res, err}
		})
	}
	// A test that fails early ends the shards (its context ends) and
	// waits for them before their folders go.
	t.Cleanup(running.Wait)
	total := len(bundles) * perShard
	overLimit := func() string {
		if _, _, _, most := log.counts(); most > limit {
			return fmt.Sprintf("%d call places held at once on the wire, over the cap of %d", most, limit)
		}
		// Marks first: a call is granted before it reaches the server.
		m := marks(t, markDir)
		if _, grants, _, _ := log.counts(); m > grants {
			return fmt.Sprintf("%d calls reached the server with %d granted", m, grants)
		}
		return ""
	}
	waitFor(t, "every trial's call acquire and 2 calls at the server", func() bool {
		acquires, _, _, _ := log.counts()
		return acquires == total && marks(t, markDir) == limit
	}, overLimit)
	done := map[string]bool{}
	for ended := 1; ended <= total; ended++ {
		// End one call that reached the server.
		var next string
		for _, c := range marked(t, markDir) {
			if !done[c] {
				next = c
				break
			}
		}
		if next == "" {
			t.Fatalf("after %d calls ended, no call is at the server: %v marked", ended-1, marked(t, markDir))
		}
		done[next] = true
		close(cl.end[next])
		<-cl.ended
		want := min(limit+ended, total)
		waitFor(t, fmt.Sprintf("%d calls at the server after %d ended", want, ended), func() bool {
			_, _, releases, _ := log.counts()
			return releases == ended && marks(t, markDir) == want
		}, overLimit)
	}
	for range bundles {
		r := <-results
		if r.err != nil {
			t.Errorf("shard ended with %v, want no error", r.err)
		} else if c := r.res.Done.Counts; c.Answered != perShard {
			t.Errorf("shard counts %+v, want %d answered", c, perShard)
		}
	}
	acquires, grants, releases, most := log.counts()
	if acquires != total || grants != total || releases != total || most != limit {
		t.Errorf("on the wire: %d call acquires, %d grants, %d releases, at most %d held at once; want %d, %d, %d and %d", acquires, grants, releases, most, total, total, total, limit)
	}
}

// callGrants returns the call-granted messages shard w received so far:
// the IDs granted, and the reasons of those refused, by ID.
func callGrants(w *pipeWorker) (granted []int64, refused map[int64]string) {
	refused = map[int64]string{}
	for _, m := range w.messages() {
		if g, ok := m.(*protocol.CallGranted); ok {
			if g.Refused != "" {
				refused[g.ID] = g.Refused
			} else {
				granted = append(granted, g.ID)
			}
		}
	}
	return granted, refused
}

// callBundleOf is a bundle for shard index whose variant uses the servers
// named.
func callBundleOf(index int, names ...string) *shard.Bundle {
	b := &shard.Bundle{Shard: index, Settings: []shard.Setting{{Variant: "v"}}}
	for _, n := range names {
		b.Settings[0].Servers = append(b.Settings[0].Servers, servers.Server{Name: n, Command: n})
	}
	return b
}

// TestCallLimitCounts plays two workers by hand against one coordinator
// whose limiter caps server "slow" at 2 calls and leaves "fast" uncapped.
// Each shard asks for 3 calls of slow at once: at every point exactly
// min(2, calls left) are granted across both shards, each release-call
// gives its place to a waiting call, and calls of fast never wait.
func TestCallLimitCounts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const limit, perShard = 2, 3
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil).WithServerCalls(map[string]int{"slow": limit}), Logger: discardLogger(),
			Bundles: []*shard.Bundle{callBundleOf(0, "slow", "fast"), callBundleOf(1, "slow", "fast")}}
		workers := []*pipeWorker{startServe(t, t.Context(), c, 0, nil), startServe(t, t.Context(), c, 1, nil)}
		for i, w := range workers {
			w.sendMsg(helloFrom("test", i))
			for id := int64(1); id <= perShard; id++ {
				w.sendMsg(&protocol.AcquireCall{ID: id, Server: "slow"})
			}
		}
		released := map[grantRef]bool{}
		total := len(workers) * perShard
		for {
			synctest.Wait()
			var held []grantRef
			for i, w := range workers {
				ids, _ := callGrants(w)
				if dup := duplicate(ids); dup != 0 {
					t.Fatalf("shard %d got call %d granted twice", i, dup)
				}
				for _, id := range ids {
					if g := (grantRef{i, id}); !released[g] {
						held = append(held, g)
					}
				}
			}
			if want := min(limit, total-len(released)); len(held) != want {
				t.Fatalf("WithServerCalls(slow: %d) with %d of %d calls released: %d call places held across both shards %v, want %d", limit, len(released), total, len(held), held, want)
			}
			if len(held) == 0 {
				break
			}
			g := held[0]
			workers[g.shard].sendMsg(&protocol.ReleaseCall{ID: g.id})
			released[g] = true
		}
		// An uncapped server's calls are granted at once.
		workers[0].sendMsg(&protocol.AcquireCall{ID: 10, Server: "fast"})
		workers[0].sendMsg(&protocol.AcquireCall{ID: 11, Server: "fast"})
		synctest.Wait()
		if ids, _ := callGrants(workers[0]); len(ids) != perShard+2 {
			t.Errorf("shard 0 got calls %v granted, want its 3 slow calls and both fast ones", ids)
		}
		for i, w := range workers {
			w.sendMsg(&protocol.Done{CleanupOK: true})
			if _, err := w.wait(); err != nil {
				t.Errorf("Serve(shard %d) = %v, want no error", i, err)
			}
		}
	})
}

// TestCallLimitRoomOfEndedShard checks that the call places a shard holds
// when its channel drops go back, so another shard's waiting call is
// granted; and that a call still waiting when its shard ends takes no
// place later.
func TestCallLimitRoomOfEndedShard(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil).WithServerCalls(map[string]int{"slow": 2}), Logger: discardLogger()}
		lost, waiting := startServe(t, t.Context(), c, 0, nil), startServe(t, t.Context(), c, 1, nil)
		lost.sendMsg(helloFrom("test", 0))
		waiting.sendMsg(helloFrom("test", 1))
		for id := int64(1); id <= 3; id++ {
			lost.sendMsg(&protocol.AcquireCall{ID: id, Server: "slow"})
		}
		synctest.Wait()
		if ids, _ := callGrants(lost); len(ids) != 2 {
			t.Fatalf("shard 0 got calls %v granted for three under a cap of two, want two", ids)
		}
		waiting.sendMsg(&protocol.AcquireCall{ID: 1, Server: "slow"})
		waiting.sendMsg(&protocol.AcquireCall{ID: 2, Server: "slow"})
		synctest.Wait()
		if ids, _ := callGrants(waiting); len(ids) != 0 {
			t.Fatalf("shard 1 got calls %v granted while shard 0 held every place, want none", ids)
		}
		lost.closeStdout()
		if _, err := lost.wait(); !errors.Is(err, shard.ErrWorkerLost) {
			t.Errorf("Serve(shard 0, channel closed) = %v, want ErrWorkerLost", err)
		}
		synctest.Wait()
		if ids, _ := callGrants(waiting); !slices.Equal(sorted(ids), []int64{1, 2}) {
			t.Errorf("shard 1 got calls %v granted after shard 0 was lost holding both places, want [1 2]", ids)
		}
		waiting.sendMsg(&protocol.Done{CleanupOK: true})
		if _, err := waiting.wait(); err != nil {
			t.Errorf("Serve(shard 1) = %v, want no error", err)
		}
	})
}

// TestCallLimitHostile plays a lying worker's call messages against a
// coordinator whose limiter caps "slow" at one call: a call acquire for a
// server its shard does not use is refused at once and takes no place; an
// ID that is not positive or was used before is not answered; and a
// release of a call never granted (never asked, still waiting, refused,
// or released before) gives nothing back, so the honest shard's held and
// waiting calls keep their order. Each refusal is logged.
func TestCallLimitHostile(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		c := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil).WithServerCalls(map[string]int{"slow": 1, "other": 1}), Logger: slog.New(slog.NewTextHandler(&logged, nil)),
			Bundles: []*shard.Bundle{callBundleOf(0, "slow"), callBundleOf(1, "slow")}}
		liar, honest := startServe(t, t.Context(), c, 0, nil), startServe(t, t.Context(), c, 1, nil)
		liar.sendMsg(helloFrom("test", 0))
		honest.sendMsg(helloFrom("test", 1))
		step := func(w *pipeWorker, m any) {
			w.sendMsg(m)
			synctest.Wait()
		}
		honestGranted := func() []int64 { ids, _ := callGrants(honest); return sorted(ids) }

		// The honest shard holds the one place; its second call waits.
		step(honest, &protocol.AcquireCall{ID: 1, Server: "slow"})
		step(honest, &protocol.AcquireCall{ID: 2, Server: "slow"})
		// The liar's call waits behind it.
		step(liar, &protocol.AcquireCall{ID: 1, Server: "slow"})
		// Servers its variants do not use, capped or not, are refused.
		step(liar, &protocol.AcquireCall{ID: 2, Server: "other"})
		step(liar, &protocol.AcquireCall{ID: 3, Server: "../../etc"})
		_, refused := callGrants(liar)
		for _, id := range []int64{2, 3} {
			if !strings.HasPrefix(refused[id], "refused by the coordinator:") {
				t.Errorf("call acquire %d for a server shard 0 does not use: answered %q, want a refusal", id, refused[id])
			}
		}
		// Not answered: an ID that is not positive, an ID used before.
		step(liar, &protocol.AcquireCall{ID: 0, Server: "slow"})
		step(liar, &protocol.AcquireCall{ID: -4, Server: "slow"})
		step(liar, &protocol.AcquireCall{ID: 2, Server: "slow"})
		if ids, refused := callGrants(liar); len(ids) != 0 || len(refused) != 2 {
			t.Errorf("shard 0 got calls %v granted and %v refused, want none granted and only 2 and 3 refused", ids, refused)
		}
		// Releases that hold no place free nothing: the honest shard's
		// second call keeps waiting.
		for _, id := range []int64{99, 1, 2, 3, 0} {
			step(liar, &protocol.ReleaseCall{ID: id})
			if got := honestGranted(); !slices.Equal(got, []int64{1}) {
				t.Fatalf("after shard 0's release-call %d (never granted): shard 1 has calls %v granted, want [1]", id, got)
			}
		}
		// A release of another shard's call ID is not the other shard's.
		step(liar, &protocol.ReleaseCall{ID: 1})
		if got := honestGranted(); !slices.Equal(got, []int64{1}) {
			t.Fatalf("shard 0's release of its own waiting ID 1 freed shard 1's place: shard 1 has %v granted", got)
		}
		// The honest release frees the place for whichever call waits.
		step(honest, &protocol.ReleaseCall{ID: 1})
		liarIDs, _ := callGrants(liar)
		grants := len(honestGranted()) + len(liarIDs)
		if grants != 2 {
			t.Fatalf("after shard 1's release: %d calls granted in all (shard 1 %v, shard 0 %v), want 2", grants, honestGranted(), liarIDs)
		}
		// A second release of the same ID frees nothing more.
		step(honest, &protocol.ReleaseCall{ID: 1})
		liarIDs, _ = callGrants(liar)
		if got := len(honestGranted()) + len(liarIDs); got != 2 {
			t.Errorf("shard 1's second release of call 1 freed another place: %d granted in all, want 2", got)
		}
		for _, w := range []*pipeWorker{liar, honest} {
			w.sendMsg(&protocol.Done{CleanupOK: true})
			if _, err := w.wait(); err != nil {
				t.Errorf("Serve = %v, want no error: the verdict is on the message, not the worker", err)
			}
		}
		if n := strings.Count(logged.String(), "refused a call"); n != 12 {
			t.Errorf("the coordinator logged %d refusals of call messages, want one for each of shard 0's 11 and shard 1's second release:\n%s", n, logged.String())
		}
	})
}

func sorted(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// lockedBuffer is a bytes.Buffer safe for a logger used by several
// goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCallLimitGaveUpWaiting checks the worker's side of a call that stops
// waiting for its place (its client gave up on it): when the place comes
// later, the worker gives it back at once, so it does not hold the place
// while other shards wait. Server "slow" takes one call at a time. Shard 0
// runs three trials calling slow and one calling the uncapped "free"
// (which keeps the shard running); the test ends the two slow calls that
// wait, then the one at the server. Only then does shard 1 start, and its
// call of slow must reach the server.
func TestCallLimitGaveUpWaiting(t *testing.T) {
	t.Parallel()
	dir, err := testbin.Build(testbin.Options{}, testbin.TestServer)
	if err != nil {
		t.Fatal(err)
	}
	command := testbin.Path(dir, testbin.TestServer)
	markDir := t.TempDir()
	cl := &callerClient{end: map[string]chan struct{}{}, ended: make(chan error, 5)}
	bundle := func(index int, cases map[string]string) *shard.Bundle {
		b := &shard.Bundle{Run: transcript.Run{ID: "r"}, Shard: index, Concurrency: len(cases)}
		for _, id := range slices.Sorted(maps.Keys(cases)) {
			srv := servers.Server{Name: cases[id], Command: command, Args: []string{"--mark", filepath.Join(markDir, id)}}
			b.Settings = append(b.Settings, shard.Setting{Variant: "v", Client: "caller", Model: "m", Servers: []servers.Server{srv}, CallLimits: map[string]int{"slow": 1}})
			b.Cases = append(b.Cases, dataset.Case{ID: id, Input: "sleep"})
			b.Add(shard.Planned{Key: transcript.Key{Case: id, Variant: "v", Trial: 1}, Setting: len(b.Settings) - 1})
			cl.end[id] = make(chan struct{})
			if err := os.Mkdir(filepath.Join(markDir, id), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	first := bundle(0, map[string]string{"a": "slow", "b": "slow", "d": "slow", "e": "free"})
	second := bundle(1, map[string]string{"c": "slow"})
	coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil).WithServerCalls(map[string]int{"slow": 1}), Logger: discardLogger(), Bundles: []*shard.Bundle{first, second}}
	log := &wireLog{}
	results := make(chan error, 2)
	var running sync.WaitGroup
	start := func(b *shard.Bundle) {
		w := &shard.Worker{Clients: client.NewRegistry(cl.definition()), Results: store.OpenDir(t.TempDir(), nil), Logger: discardLogger(), MSTVersion: "test", WorkDir: t.TempDir()}
		running.Go(func() {
			_, err := runTapped(t.Context(), w, b, coord, log)
			results <- err
		})
		// A test that fails early ends the shards (its context ends) and
		// waits for them before their folders go.
		t.Cleanup(running.Wait)
	}
	none := func() string { return "" }
	start(first)
	waitFor(t, "shard 0's three slow calls asked and one at the server, beside the free call", func() bool {
		acquires, _, _, _ := log.counts()
		return acquires == 3 && len(marked(t, markDir)) == 2
	}, none)
	at := marked(t, markDir) // the free call's trial and one slow one
	for _, id := range []string{"a", "b", "d"} {
		if !slices.Contains(at, id) {
			close(cl.end[id]) // a call waiting for its place gives up
			<-cl.ended
		}
	}
	for _, id := range at {
		if id != "e" {
			close(cl.end[id])
			<-cl.ended
		}
	}
	start(second)
	waitFor(t, "shard 1's call at the server, once shard 0's given-up calls gave their places back", func() bool {
		return slices.Contains(marked(t, markDir), "c")
	}, none)
	close(cl.end["c"])
	close(cl.end["e"])
	for range 2 {
		<-cl.ended
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("shard ended with %v, want no error", err)
		}
	}
	if acquires, grants, releases, most := log.counts(); acquires != 4 || grants != 4 || releases != 4 || most != 1 {
		t.Errorf("on the wire: %d call acquires, %d grants, %d releases, at most %d held at once; want 4, 4, 4 and 1", acquires, grants, releases, most)
	}
}
