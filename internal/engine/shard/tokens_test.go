package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// tokClient is a run-only client that records what each trial was given
// (its Env, and the tokens folder's files and modes) and then leaks every
// value it knows into each part of its result, as a careless client or a
// model repeating a tool's output might.
type tokClient struct {
	// leak are values to leak beside the ones read from the folder.
	leak []string
	// hang makes a trial wait for its context to end.
	hang bool

	mu      sync.Mutex
	env     map[string]string
	files   map[string]string
	modes   map[string]fs.FileMode
	dirMode fs.FileMode
	trials  int
}

func (c *tokClient) definition() *client.Definition {
	return &client.Definition{Name: "tok", Description: "records tokens, then leaks them", Options: json.RawMessage(`{}`), Run: c.run}
}

func (c *tokClient) run(ctx context.Context, p client.OpenParams, tr client.Trial) (client.Result, error) {
	files, modes := map[string]string{}, map[string]fs.FileMode{}
	var dirMode fs.FileMode
	if dir := p.Env[shard.TokensDirEnv]; dir != "" {
		if info, err := os.Stat(dir); err == nil {
			dirMode = info.Mode()
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() == proctree.OwnerFile {
				continue // names the worker; not a token
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			info, ierr := e.Info()
			if err != nil || ierr != nil {
				return client.Result{}, fmt.Errorf("reading the token file %s: %w", e.Name(), errors.Join(err, ierr))
			}
			files[e.Name()], modes[e.Name()] = string(b), info.Mode()
		}
	}
	c.mu.Lock()
	c.env, c.files, c.modes, c.dirMode = maps.Clone(p.Env), files, modes, dirMode
	c.trials++
	c.mu.Unlock()
	if c.hang {
		<-ctx.Done()
	}
	leaked := strings.Join(append(c.leak, slices.Collect(maps.Values(files))...), " ")
	args, _ := json.Marshal(map[string]string{"authorization": "Bearer " + leaked})
	return client.Result{
		Messages:        []transcript.Message{{Role: "assistant", Text: "the tokens are " + leaked}},
		ToolCalls:       []transcript.ToolCall{{ID: "1", Server: "drive", Tool: "search", Arguments: args}},
		Answer:          leaked,
		ClientTelemetry: map[string]any{"stderr": "sending " + leaked},
		Outcome:         transcript.Outcome{Status: transcript.Answered, Detail: "used " + leaked},
	}, nil
}

// seen returns what the last trial was given.
func (c *tokClient) seen() (env, files map[string]string, modes map[string]fs.FileMode, dirMode fs.FileMode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.env, c.files, c.modes, c.dirMode
}

// tokBundle is one shard of one trial for the tok client.
func tokBundle() *shard.Bundle {
	key := transcript.Key{Case: "c", Variant: "v", Trial: 1}
	return &shard.Bundle{
		Run:      transcript.Run{ID: "r"},
		Settings: []shard.Setting{{Variant: "v", Client: "tok", Model: "m"}},
		Cases:    []dataset.Case{{ID: "c", Input: "use the drive"}},
		Series:   shard.SeriesOf(shard.Planned{Key: key}),
	}
}

func tokLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// tokPeer runs a Worker over pipes, with the test as its coordinator.
type tokPeer struct {
	enc *protocol.Encoder
	// msgs are the worker's messages, heartbeats left out.
	msgs chan any
	// ran is Run's result.
	ran   chan error
	stdin io.Closer
}

func tokStartWorker(t *testing.T, w *shard.Worker, b *shard.Bundle) *tokPeer {
	t.Helper()
	toWorker, fromTest := io.Pipe()
	fromWorker, toTest := io.Pipe()
	p := &tokPeer{enc: protocol.NewEncoder(fromTest), msgs: make(chan any, 16), ran: make(chan error, 1), stdin: fromTest}
	go func() {
		err := w.Run(t.Context(), b, toWorker, toTest)
		toTest.Close()
		p.ran <- err
	}()
	go func() {
		defer close(p.msgs)
		dec := protocol.NewDecoder(fromWorker)
		for {
			m, err := dec.Read()
			if err != nil {
				return
			}
			if _, ok := m.(*protocol.Heartbeat); !ok {
				p.msgs <- m
			}
		}
	}()
	return p
}

// send writes one message to the worker and waits until it has been
// handled.
func (p *tokPeer) send(t *testing.T, m any) {
	t.Helper()
	if err := p.enc.Write(m); err != nil {
		t.Fatalf("writing %T to the worker: %v", m, err)
	}
	synctest.Wait()
}

// next returns the worker's next message, once every goroutine is blocked.
func (p *tokPeer) next(t *testing.T) any {
	t.Helper()
	synctest.Wait()
	select {
	case m, ok := <-p.msgs:
		if !ok {
			t.Fatal("the worker's stdout closed; want another message")
		}
		return m
	default:
		t.Fatal("the worker sent nothing; want a message")
		return nil
	}
}

// quiet fails if the worker sent a message.
func (p *tokPeer) quiet(t *testing.T, when string) {
	t.Helper()
	synctest.Wait()
	select {
	case m := <-p.msgs:
		t.Fatalf("%s: the worker sent %T %+v; want nothing", when, m, m)
	default:
	}
}

// finish closes the worker's stdin and returns what Run returned.
func (p *tokPeer) finish(t *testing.T) error {
	t.Helper()
	p.stdin.Close()
	return <-p.ran
}

// readFile returns a file's content, or "(absent)".
func tokReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "(absent)"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkNoValues fails if any file under dir holds one of values.
func tokCheckNoValues(t *testing.T, dir string, values ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, v := range values {
			if strings.Contains(string(b), v) {
				t.Errorf("%s holds the token value %q", path, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWorkerTokenRefresh hands a worker a token that expires, and checks
// the folder and its modes, the ask for a fresh value at 80% of the
// token's life, the file replaced when the fresh value comes, and the
// value dropped when no fresh one comes before it expires. The trial that
// runs after that still runs, and its transcript holds no token value.
func TestWorkerTokenRefresh(t *testing.T) {
	t.Parallel()
	const (
		static = "static-key-0123456789"
		first  = "drive-token-first-value"
		second = "drive-token-second-value"
	)
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tokens")
		results := t.TempDir()
		c := &tokClient{leak: []string{first, second}}
		set := secrets.New()
		w := &shard.Worker{
			Clients: client.NewRegistry(c.definition()), Results: store.OpenDir(results, secrets.NewRedactor(set)), Secrets: set,
			Logger: tokLogger(), MSTVersion: "test", WorkDir: t.TempDir(), TokensDir: dir,
		}
		p := tokStartWorker(t, w, tokBundle())
		if _, ok := p.next(t).(*protocol.Hello); !ok {
			t.Fatal("the worker's first message is not hello")
		}
		start := time.Now()
		p.send(t, &protocol.Tokens{
			Values:  map[string]string{"API_KEY": static, "DRIVE_TOKEN": first},
			Expires: map[string]time.Time{"DRIVE_TOKEN": start.Add(10 * time.Minute)},
		})
		acq, ok := p.next(t).(*protocol.Acquire)
		if !ok {
			t.Fatal("the worker did not ask for room for its trial")
		}
		// The trial waits for room while the token's life runs.
		info, err := os.Stat(dir)
		if err != nil {
			t.Fatalf("tokens folder: %v", err)
		}
		if info.Mode().Perm() != 0o700 {
			t.Errorf("tokens folder mode = %v, want 0700", info.Mode().Perm())
		}
		// The folder names its worker, for mst runner cleanup.
		if o, err := proctree.ReadOwner(dir); err != nil || o.PID != os.Getpid() {
			t.Errorf("tokens folder owner = %+v, %v; want this process (%d)", o, err, os.Getpid())
		}
		path := filepath.Join(dir, "DRIVE_TOKEN")
		if got := tokReadFile(t, path); got != first {
			t.Errorf("DRIVE_TOKEN holds %q, want %q", got, first)
		}
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("DRIVE_TOKEN: %v, want a file with mode 0600", err)
		}
		// The static key (no expiry) reaches clients through their
		// environment only.
		if _, err := os.Stat(filepath.Join(dir, "API_KEY")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("API_KEY has a file in the tokens folder (%v); static secrets must not", err)
		}

		// A ten-minute token is asked for again at 8 minutes, not before.
		time.Sleep(8*time.Minute - time.Second)
		p.quiet(t, "before 80% of the token's life")
		time.Sleep(time.Second)
		if diff := cmp.Diff(&protocol.NeedTokens{Names: []string{"DRIVE_TOKEN"}}, p.next(t)); diff != "" {
			t.Errorf("at 80%% of the token's life (-want +got):\n%s", diff)
		}
		p.send(t, &protocol.Tokens{
			Values:  map[string]string{"DRIVE_TOKEN": second},
			Expires: map[string]time.Time{"DRIVE_TOKEN": time.Now().Add(10 * time.Minute)},
		})
		if got := tokReadFile(t, filepath.Join(dir, "DRIVE_TOKEN")); got != second {
			t.Errorf("DRIVE_TOKEN after the fresh value = %q, want %q", got, second)
		}

		// The first value's expiry passes; the fresh one stays.
		time.Sleep(2*time.Minute + time.Second)
		p.quiet(t, "when the first value expired")
		if got := tokReadFile(t, filepath.Join(dir, "DRIVE_TOKEN")); got != second {
			t.Errorf("DRIVE_TOKEN after the first value's expiry = %q, want %q", got, second)
		}

		// No answer to the next ask: the value goes when it expires.
		time.Sleep(time.Until(start.Add(16 * time.Minute)))
		if diff := cmp.Diff(&protocol.NeedTokens{Names: []string{"DRIVE_TOKEN"}}, p.next(t)); diff != "" {
			t.Errorf("at 80%% of the fresh token's life (-want +got):\n%s", diff)
		}
		time.Sleep(2 * time.Minute)
		p.quiet(t, "when the fresh value expired")
		if got := tokReadFile(t, filepath.Join(dir, "DRIVE_TOKEN")); got != "(absent)" {
			t.Errorf("DRIVE_TOKEN after it expired holds %q, want no file", got)
		}

		// The trial still runs, without the token.
		p.send(t, &protocol.Granted{ID: acq.ID})
		tr, ok := p.next(t).(*protocol.Trial)
		if !ok || tr.Status != transcript.Answered {
			t.Fatalf("trial = %+v, want an answered trial", tr)
		}
		if _, ok := p.next(t).(*protocol.Done); !ok {
			t.Fatal("the worker did not say done")
		}
		if err := p.finish(t); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("tokens folder after Run: %v, want it removed", err)
		}
		env, files, _, _ := c.seen()
		wantEnv := map[string]string{"API_KEY": static, shard.TokensDirEnv: dir}
		if diff := cmp.Diff(wantEnv, env); diff != "" {
			t.Errorf("the session's Env (-want +got):\n%s", diff)
		}
		if len(files) > 0 {
			t.Errorf("the trial found token files %v after the token expired; want none (static secrets have no file)", files)
		}
		raw := tokReadFile(t, filepath.Join(results, tr.Path))
		if !strings.Contains(raw, "[redacted:DRIVE_TOKEN]") {
			t.Errorf("transcript does not show the leaked values redacted:\n%s", raw)
		}
		tokCheckNoValues(t, results, static, first, second)
	})
}

// TestWorkerTokensCancel checks that the tokens folder, in its default
// place, goes when the run is cancelled with a trial in flight.
func TestWorkerTokensCancel(t *testing.T) {
	t.Parallel()
	const value = "drive-token-cancelled"
	synctest.Test(t, func(t *testing.T) {
		c := &tokClient{hang: true}
		set := secrets.New()
		w := &shard.Worker{
			Clients: client.NewRegistry(c.definition()), Results: store.OpenDir(t.TempDir(), secrets.NewRedactor(set)), Secrets: set,
			Logger: tokLogger(), MSTVersion: "test", WorkDir: t.TempDir(),
		}
		p := tokStartWorker(t, w, tokBundle())
		p.next(t) // hello
		p.send(t, &protocol.Tokens{Values: map[string]string{"DRIVE_TOKEN": value}, Expires: map[string]time.Time{"DRIVE_TOKEN": time.Now().Add(time.Hour)}})
		acq := p.next(t).(*protocol.Acquire)
		p.send(t, &protocol.Granted{ID: acq.ID})
		env, files, modes, dirMode := c.seen()
		dir := env[shard.TokensDirEnv]
		tokCheckDefaultDir(t, dir)
		if dir != "" && (dirMode.Perm() != 0o700 || modes["DRIVE_TOKEN"].Perm() != 0o600 || files["DRIVE_TOKEN"] != value) {
			t.Errorf("the trial found folder mode %v, files %v with modes %v; want 0700 and DRIVE_TOKEN with 0600", dirMode.Perm(), slices.Sorted(maps.Keys(files)), modes)
		}

		p.send(t, &protocol.Cancel{Reason: "test"})
		tr := p.next(t).(*protocol.Trial)
		if tr.Status != transcript.Cancelled {
			t.Errorf("trial status = %s, want cancelled", tr.Status)
		}
		if d := p.next(t).(*protocol.Done); !d.CleanupOK {
			t.Errorf("done = %+v, want a clean clean-up", d)
		}
		if err := p.finish(t); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if _, err := os.Stat(dir); dir != "" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("tokens folder %s after a cancelled Run: %v, want it removed", dir, err)
		}
	})
}

// checkDefaultTokensDir checks where a worker put its tokens folder by
// itself: on Linux in /run/mst/tokens, $XDG_RUNTIME_DIR or /dev/shm, which
// a Linux machine running workers has; elsewhere nowhere, since there the
// worker cannot tell a memory-backed folder from a disk.
func tokCheckDefaultDir(t *testing.T, dir string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		if dir != "" {
			t.Errorf("tokens folder on %s = %s, want none", runtime.GOOS, dir)
		}
		return
	}
	prefix := fmt.Sprintf("mst-tokens-%d-", os.Getpid())
	switch {
	case dir == "":
		t.Errorf("no tokens folder; want one in /run/mst/tokens, $XDG_RUNTIME_DIR or /dev/shm")
	case dir == "/run/mst/tokens":
	case strings.HasPrefix(filepath.Base(dir), prefix) && (filepath.Dir(dir) == "/dev/shm" || filepath.Dir(dir) == os.Getenv("XDG_RUNTIME_DIR")):
	default:
		t.Errorf("tokens folder = %s, want /run/mst/tokens or %s* in $XDG_RUNTIME_DIR or /dev/shm", dir, prefix)
	}
	if typ := tokFSType(t, filepath.Dir(dir)); typ != "tmpfs" && typ != "ramfs" {
		t.Errorf("tokens folder %s is on %s, want tmpfs or ramfs", dir, typ)
	}
}

// tokFSType returns the type of the file system dir is on, from
// /proc/mounts: that of the last mount of the longest mount point holding
// dir.
func tokFSType(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	best, typ := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := strings.ReplaceAll(f[1], `\040`, " ")
		if (mp == "/" || dir == mp || strings.HasPrefix(dir, mp+"/")) && len(mp) >= len(best) {
			best, typ = mp, f[2]
		}
	}
	return typ
}

// tokSource is a TokenSource that records what it was asked and answers
// with answer.
type tokSource struct {
	answer func(req protocol.NeedTokens) (map[string]shard.Token, error)
	// refuse answers these names Refused, with the reason, instead.
	refuse map[string]string

	mu   sync.Mutex
	reqs []protocol.NeedTokens
}

func (s *tokSource) Tokens(ctx context.Context, req protocol.NeedTokens) (map[string]shard.Token, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	got, err := s.answer(req)
	for name, why := range s.refuse {
		if got != nil {
			got[name] = shard.Token{Refused: why}
		}
	}
	return got, err
}

// TestCoordinatorTokenSource plays a worker that asks for tokens, and
// checks the coordinator answers through its TokenSource, sends a value
// only once it is in the run's secrets (so it is redacted), leaves out a
// value the Set refuses, and tells the worker why when the source fails or
// refuses a name.
func TestCoordinatorTokenSource(t *testing.T) {
	t.Parallel()
	const (
		static = "static-key-0123456789"
		canary = "canary-token-5f1e2d3c"
	)
	synctest.Test(t, func(t *testing.T) {
		expires := time.Now().Add(time.Hour)
		src := &tokSource{answer: func(req protocol.NeedTokens) (map[string]shard.Token, error) {
			if len(req.Names) > 0 && req.Names[0] == "BROKEN" {
				return nil, errors.New("the refresh grant was revoked")
			}
			return map[string]shard.Token{"DRIVE_TOKEN": {Value: canary, Expires: expires}, "SHORT": {Value: "ab"}}, nil
		}}
		set := secrets.New()
		if err := set.Add("API_KEY", static); err != nil {
			t.Fatal(err)
		}
		coord := &shard.Coordinator{MSTVersion: "test", Logger: tokLogger(), Secrets: set, TokenSource: src}
		toCoord, fromWorker := io.Pipe()
		fromCoord, toWorker := io.Pipe()
		type served struct {
			res shard.ShardResult
			err error
		}
		ran := make(chan served, 1)
		go func() {
			res, err := coord.Serve(t.Context(), 0, toCoord, toWorker, nil)
			toWorker.Close()
			ran <- served{res, err}
		}()
		msgs := make(chan any, 16)
		go func() {
			defer close(msgs)
			dec := protocol.NewDecoder(fromCoord)
			for {
				m, err := dec.Read()
				if err != nil {
					return
				}
				msgs <- m
			}
		}()
		enc := protocol.NewEncoder(fromWorker)
		next := func(when string) any {
			synctest.Wait()
			select {
			case m := <-msgs:
				return m
			default:
				t.Fatalf("%s: the coordinator sent nothing", when)
				return nil
			}
		}

		enc.Write(&protocol.Hello{Protocol: protocol.Protocol, MSTVersion: "test"})
		if diff := cmp.Diff(&protocol.Tokens{Values: map[string]string{"API_KEY": static}}, next("after hello")); diff != "" {
			t.Errorf("tokens after hello (-want +got):\n%s", diff)
		}
		enc.Write(&protocol.NeedTokens{Servers: []string{"drive"}, Names: []string{"DRIVE_TOKEN"}})
		want := &protocol.Tokens{Values: map[string]string{"DRIVE_TOKEN": canary}, Expires: map[string]time.Time{"DRIVE_TOKEN": expires}}
		if diff := cmp.Diff(want, next("after need-tokens")); diff != "" {
			t.Errorf("tokens answering need-tokens (-want +got):\n%s", diff)
		}
		if v, ok := set.Get("DRIVE_TOKEN"); !ok || v != canary {
			t.Errorf("the run's secrets hold DRIVE_TOKEN = %q, %v; want the value handed out", v, ok)
		}
		if got, want := secrets.NewRedactor(set).String("Bearer "+canary), "Bearer [redacted:DRIVE_TOKEN]"; got != want {
			t.Errorf("the run's redaction of the handed-out token = %q, want %q", got, want)
		}
		if _, ok := set.Get("SHORT"); ok {
			t.Errorf("the run's secrets hold SHORT, a value too short to redact; want it refused")
		}

		// A failed source: the worker is told why, and gets no value.
		enc.Write(&protocol.NeedTokens{Names: []string{"BROKEN"}})
		wantRefused := &protocol.Tokens{Values: map[string]string{}, Errors: map[string]string{"BROKEN": "the coordinator could not get it: the refresh grant was revoked"}}
		if diff := cmp.Diff(wantRefused, next("after a failed token source")); diff != "" {
			t.Errorf("tokens answering need-tokens the source failed (-want +got):\n%s", diff)
		}
		// A source that refuses one name and serves another.
		src.refuse = map[string]string{"DRIVE_TOKEN": "grant refused; run mst auth drive -c EVAL"}
		enc.Write(&protocol.NeedTokens{Names: []string{"DRIVE_TOKEN"}})
		wantMixed := &protocol.Tokens{Values: map[string]string{}, Errors: map[string]string{"DRIVE_TOKEN": "grant refused; run mst auth drive -c EVAL"}}
		if diff := cmp.Diff(wantMixed, next("after a refused name")); diff != "" {
			t.Errorf("tokens answering need-tokens for a refused name (-want +got):\n%s", diff)
		}

		enc.Write(&protocol.Done{CleanupOK: true})
		if s := <-ran; s.err != nil || s.res.Done == nil {
			t.Errorf("Serve = %+v, %v; want done", s.res, s.err)
		}
		fromWorker.Close()
		wantReqs := []protocol.NeedTokens{{Servers: []string{"drive"}, Names: []string{"DRIVE_TOKEN"}}, {Names: []string{"BROKEN"}}, {Names: []string{"DRIVE_TOKEN"}}}
		if diff := cmp.Diff(wantReqs, src.reqs); diff != "" {
			t.Errorf("the token source was asked (-want +got):\n%s", diff)
		}
	})
}

// TestCoordinatorTokenSourceNeedsSecrets: a token source without a Set to
// redact its tokens with is refused before any message.
func TestCoordinatorTokenSourceNeedsSecrets(t *testing.T) {
	t.Parallel()
	coord := &shard.Coordinator{MSTVersion: "test", Logger: tokLogger(), TokenSource: &tokSource{}}
	_, err := coord.Serve(t.Context(), 0, strings.NewReader(""), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "needs Secrets") {
		t.Errorf("Serve with a token source and no Secrets = %v, want an error saying it needs Secrets", err)
	}
}

// TestTokenCanary runs a shard through the real coordinator and worker over
// pipes (runPipes), with a canary token in the run's secrets. The
// client reads it from the tokens folder and leaks it everywhere it can;
// no file the worker wrote holds it, and the folder is gone at the end.
func TestTokenCanary(t *testing.T) {
	t.Parallel()
	const canary = "canary-7a0c91e4b2d8"
	set := secrets.New()
	if err := set.Add("CANARY_TOKEN", canary); err != nil {
		t.Fatal(err)
	}
	results, work := t.TempDir(), t.TempDir()
	c := &tokClient{leak: []string{canary}}
	logger := tokLogger()
	// The worker's own Set, as a worker process has: the canary reaches
	// it only in the coordinator's tokens message.
	workerSet := secrets.New()
	w := &shard.Worker{
		Clients: client.NewRegistry(c.definition()), Results: store.OpenDir(results, secrets.NewRedactor(workerSet)), Secrets: workerSet,
		Logger: logger, MSTVersion: "test", WorkDir: work,
	}
	ev := &trialEvents{}
	coord := &shard.Coordinator{MSTVersion: "test", Events: ev, Logger: logger, Secrets: set}
	res, err := runPipes(t.Context(), w, tokBundle(), coord, nil)
	if err != nil {
		t.Fatalf("runPipes: %v", err)
	}
	if res.Done == nil || res.Done.Counts.Answered != 1 {
		t.Fatalf("done = %+v, want one answered trial", res.Done)
	}
	env, files, _, _ := c.seen()
	dir := env[shard.TokensDirEnv]
	// A static secret (no expiry) reaches the client through its
	// environment only: no file, so no tokens folder.
	if env["CANARY_TOKEN"] != canary {
		t.Errorf("the client's environment lacks CANARY_TOKEN")
	}
	if dir != "" || len(files) > 0 {
		t.Errorf("a run with only static secrets made tokens folder %q with %v; want none", dir, slices.Sorted(maps.Keys(files)))
	}
	if _, err := os.Stat(dir); dir != "" && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tokens folder %s after the shard: %v, want it removed", dir, err)
	}
	trials := ev.got()
	if len(trials) != 1 {
		t.Fatalf("%d trials reported, want 1", len(trials))
	}
	raw := tokReadFile(t, filepath.Join(results, trials[0].Path))
	if !strings.Contains(raw, "[redacted:CANARY_TOKEN]") {
		t.Errorf("transcript does not show the leaked canary redacted:\n%s", raw)
	}
	tokCheckNoValues(t, results, canary)
	tokCheckNoValues(t, work, canary)
}
