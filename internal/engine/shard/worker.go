package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// HeartbeatEvery is how often a worker sends a heartbeat while it runs,
// unless Worker.Heartbeat says otherwise.
const HeartbeatEvery = 10 * time.Second

// Worker runs the trials of one shard: the one trial loop every runner uses.
type Worker struct {
	Clients *client.Registry
	// Plugins are this process's plugin versions, which hello reports.
	Plugins PluginVersions
	// Results is where the worker writes transcripts: the run's store
	// itself (the local runner), or a folder on the worker's machine the
	// coordinator fetches them from. Open it with a redactor of Secrets
	// (secrets.NewRedactor(Secrets)), so values the worker receives later
	// are redacted too.
	Results store.Run
	// ResultsError, when set, says why the store the bundle names
	// (Bundle.Store) could not be opened on this machine: the readiness
	// check fails with it, before any server starts.
	ResultsError error
	// Heartbeat is how often the worker sends a heartbeat (HeartbeatEvery
	// when zero).
	Heartbeat time.Duration
	// Secrets holds the values clients may read (keys and tokens). The
	// coordinator sends them in tokens messages; they stay in memory, and
	// in a memory-backed folder of files (see TokensDir), and every one is
	// redacted from what the worker writes.
	Secrets *secrets.Set
	// TokensDir, when set, is the folder the worker writes token files to,
	// instead of the first it can make on a memory-backed file system of
	// /run/mst/tokens, $XDG_RUNTIME_DIR/mst-tokens-<pid>-* and
	// /dev/shm/mst-tokens-<pid>-*. It must not exist: the worker makes it
	// (mode 0700, files 0600) when the first token arrives, and removes it
	// before Run returns. A runner sets it only to a memory-backed folder.
	// Sessions find the folder in their Env as MST_TOKENS_DIR.
	TokensDir string
	// Environment says where the worker runs.
	Environment transcript.Environment
	// ImageDigest identifies the machine image the worker runs in, when
	// its runner said (ImageDigestEnv); hello carries it to the run's
	// record.
	ImageDigest string
	Logger      *slog.Logger
	MSTVersion  string
	// WorkDir is a folder for sessions' files.
	WorkDir string
	// AbandonGrace is how long a client that ignores its trial's end (the
	// timeout, a cancel) is waited for before the worker gives up on it:
	// the trial is recorded without it and its session closed, so one
	// stuck client cannot hang the shard. Zero means AbandonGrace.
	AbandonGrace time.Duration
}

// AbandonGrace is the default Worker.AbandonGrace.
const AbandonGrace = 30 * time.Second

// Run runs the bundle's trials, reading coordinator messages from in and
// writing protocol messages to out (nothing else). It returns when every
// trial has ended or a cancel arrived and in-flight trials ended.
func (w *Worker) Run(ctx context.Context, b *Bundle, in io.Reader, out io.Writer) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("the bundle: %w", err)
	}
	if b.Work == WorkGrade {
		return errors.New("the bundle grades transcripts; mst collect runs trials only: a runner starts mst grade-shard for it")
	}
	enc := protocol.NewEncoder(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// runCtx ends on cancel (Ctrl-C or a cancel message): trials in flight
	// end as cancelled.
	if w.Secrets == nil {
		w.Secrets = secrets.New()
	}
	r := &workerRun{w: w, b: b, enc: enc, results: w.Results, grants: map[int64]chan struct{}{}, accepted: make(chan struct{})}
	r.tokens = newWorkerTokens(w.Secrets, w.Logger, w.TokensDir, func(names []string, rejected bool) {
		m := &protocol.NeedTokens{Names: names}
		if rejected {
			m.Rejected = names
		}
		if err := enc.Write(m); err != nil {
			w.Logger.Warn("asking for fresh tokens failed", "names", names, "err", err)
		}
	})
	// The tokens folder goes on every way out; the normal ways remove it
	// before done, to report a failure to.
	defer r.tokens.close()
	go r.readCoordinator(in, cancel)

	// Heartbeats start first: asking the clients' programs for their
	// versions, which hello carries, may take a while (a Node CLI starts
	// slowly on a busy machine), and so may the readiness check.
	hbCtx, stopHB := context.WithCancel(context.Background())
	defer stopHB()
	go r.heartbeat(hbCtx)
	if err := enc.Write(&protocol.Hello{Protocol: protocol.Protocol, MSTVersion: w.MSTVersion, Shard: b.Shard, ImageDigest: w.ImageDigest, OS: runtime.GOOS, Arch: runtime.GOARCH, ClientVersions: w.clientVersions(ctx, b), Plugins: w.Plugins.For(slices.Collect(maps.Keys(b.Plugins)))}); err != nil {
		return fmt.Errorf("writing hello: %w", err)
	}
	// The readiness check starts servers: only for a worker the
	// coordinator accepted, which it says with its first tokens message. A
	// cancel or a closed stdin first means it refused this one.
	select {
	case <-r.accepted:
	case <-ctx.Done():
	}
	select {
	case <-r.accepted:
	default:
		stopHB()
		cleanup := r.tokens.close()
		err := fmt.Errorf("the coordinator did not accept this worker (%s); no server started", r.cancelled())
		enc.Write(&protocol.Done{Error: err.Error(), CleanupOK: cleanup == nil, Counts: r.counts()})
		return err
	}
	r.askConnectors()
	if err := r.ready(ctx); err != nil {
		stopHB()
		cleanup := r.tokens.close()
		enc.Write(&protocol.Done{Error: err.Error(), CleanupOK: cleanup == nil, Counts: r.counts()})
		return err
	}

	each(ctx, b.Trials(), max(b.Concurrency, 1), func(pt Planned) { r.trial(ctx, pt) })
	stopHB()
	r.closeWarm()
	cleanup := errors.Join(r.closeSessions(), r.tokens.close())
	r.closing.Wait()
	if r.proxies != nil {
		r.proxies.Close()
	}
	return enc.Write(&protocol.Done{Counts: r.counts(), CleanupOK: cleanup == nil})
}

type workerRun struct {
	w       *Worker
	b       *Bundle
	enc     *protocol.Encoder
	results store.Run
	tokens  *workerTokens

	mu       sync.Mutex
	grants   map[int64]chan struct{}
	skips    map[int64]string // the Skip of a granted acquire, when set
	nextID   int64
	pools    map[int]*pool
	tally    transcript.Counts
	inFlight atomic.Int64
	done     atomic.Int64
	// accepted closes at the coordinator's first tokens message: it
	// accepted the hello. reason is the last cancel's reason.
	accepted   chan struct{}
	acceptOnce sync.Once
	reason     string

	// Places for tool calls under limits.serverCalls: callGrants are the
	// call acquires waiting for their call-granted, callsGaveUp those whose
	// call stopped waiting (its grant is given back when it comes).
	nextCallID  int64
	callGrants  map[int64]chan string
	callsGaveUp map[int64]bool

	// turns holds, per client whose definition says OneTrialPerMachine,
	// the one trial of it this machine runs at a time; guarded by mu.
	turns map[string]chan struct{}

	// proxies serves the MCP proxies of trials whose client takes them
	// (client.Definition.ProxiedServers); started at the first such trial.
	proxies     *mcpproxy.Host
	proxiesErr  error
	proxiesOnce sync.Once
	// closing tracks the trials' proxy sets that are still stopping.
	closing sync.WaitGroup
	// warm are the readiness check's connections to stdio servers, by
	// server (warmKey), each given to the first trial that starts that
	// server (takeWarm); warmUntil is when the ones left are closed.
	warmMu    sync.Mutex
	warm      map[string][]*servers.Conn
	warmUntil time.Time
}

// warmFor is how long a readiness check's connection waits for a trial:
// past it, a server that sat idle is started afresh for its trial.
const warmFor = time.Minute

// warmKey identifies a server by everything that starts it (its command,
// arguments, environment and folder; the tools' overrides aside).
func warmKey(s servers.Server) string {
	s.Tools = nil
	b, _ := json.Marshal(s)
	return string(b)
}

// keepWarm keeps the readiness check's open stdio connections for the
// first trials, and closes the others.
func (r *workerRun) keepWarm(list []servers.Server, conns []*servers.Conn) {
	r.warmMu.Lock()
	defer r.warmMu.Unlock()
	r.warm, r.warmUntil = map[string][]*servers.Conn{}, time.Now().Add(warmFor)
	for i, c := range conns {
		if c == nil {
			continue
		}
		if list[i].Command == "" {
			// A remote server's session may expire while it waits.
			r.closing.Go(func() { c.Close() })
			continue
		}
		k := warmKey(list[i])
		r.warm[k] = append(r.warm[k], c)
	}
}

// takeWarm gives a trial the readiness check's connection to s, if one
// is left and fresh enough (mcpproxy.Options.Take).
func (r *workerRun) takeWarm(s servers.Server) *servers.Conn {
	r.warmMu.Lock()
	defer r.warmMu.Unlock()
	k := warmKey(s)
	cs := r.warm[k]
	if len(cs) == 0 {
		return nil
	}
	if time.Now().After(r.warmUntil) {
		r.closeWarmLocked()
		return nil
	}
	c := cs[len(cs)-1]
	r.warm[k] = cs[:len(cs)-1]
	return c
}

// closeWarm closes the readiness check's connections no trial took.
func (r *workerRun) closeWarm() {
	r.warmMu.Lock()
	defer r.warmMu.Unlock()
	r.closeWarmLocked()
}

func (r *workerRun) closeWarmLocked() {
	for k, cs := range r.warm {
		for _, c := range cs {
			r.closing.Go(func() { c.Close() })
		}
		delete(r.warm, k)
	}
}

// proxyHost returns the run's proxy host, starting it the first time.
func (r *workerRun) proxyHost() (*mcpproxy.Host, error) {
	r.proxiesOnce.Do(func() { r.proxies, r.proxiesErr = mcpproxy.NewHost() })
	return r.proxies, r.proxiesErr
}

// cancelled says why the run stopped before the coordinator accepted it.
func (r *workerRun) cancelled() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reason == "" {
		return "its channel closed or the run ended"
	}
	return "cancel: " + r.reason
}

// readCoordinator handles granted, call-granted, tokens and cancel until
// in ends.
func (r *workerRun) readCoordinator(in io.Reader, cancel context.CancelFunc) {
	dec := protocol.NewDecoder(in)
	for {
		m, err := dec.Read()
		if err != nil {
			// EOF, or a pipe the local runner closed: the coordinator is
			// done with this worker, which is no news.
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, protocol.ErrUnknownMessage) {
				r.w.Logger.Warn("coordinator channel", "err", err)
			}
			if errors.Is(err, protocol.ErrUnknownMessage) {
				r.w.Logger.Warn("ignoring a message this worker does not know", "err", err)
				continue
			}
			// The coordinator is gone: stop.
			cancel()
			return
		}
		switch m := m.(type) {
		case *protocol.Granted:
			r.mu.Lock()
			ch := r.grants[m.ID]
			delete(r.grants, m.ID)
			if ch != nil && m.Skip != "" {
				if r.skips == nil {
					r.skips = map[int64]string{}
				}
				r.skips[m.ID] = m.Skip
			}
			r.mu.Unlock()
			if ch != nil {
				close(ch)
			}
		case *protocol.CallGranted:
			r.mu.Lock()
			ch, waiting := r.callGrants[m.ID]
			delete(r.callGrants, m.ID)
			gaveUp := r.callsGaveUp[m.ID]
			delete(r.callsGaveUp, m.ID)
			r.mu.Unlock()
			switch {
			case waiting:
				ch <- m.Refused
			case gaveUp && m.Refused == "":
				r.enc.Write(&protocol.ReleaseCall{ID: m.ID})
			}
		case *protocol.Tokens:
			// Handled before the next message, so a trial granted after
			// a tokens message finds its values.
			r.tokens.receive(m)
			r.acceptOnce.Do(func() { close(r.accepted) })
		case *protocol.Cancel:
			r.w.Logger.Info("cancel received", "reason", m.Reason)
			r.mu.Lock()
			r.reason = m.Reason
			r.mu.Unlock()
			cancel()
		}
	}
}

func (r *workerRun) heartbeat(ctx context.Context) {
	every := r.w.Heartbeat
	if every <= 0 {
		every = HeartbeatEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.enc.Write(&protocol.Heartbeat{InFlight: int(r.inFlight.Load()), Done: int(r.done.Load())})
		}
	}
}

// ready is the readiness check: every server of every variant connects and
// lists at least one tool, with the variant's tool overrides valid, and
// every tool and server the graders name is one the variant has. A variant
// that declares no servers (its client brings its own) is not checked
// against its graders.
func (r *workerRun) ready(ctx context.Context) error {
	if err := r.checkResults(ctx); err != nil {
		return err
	}
	plan := r.readinessPlan()
	if err := r.checkClients(); err != nil {
		return err
	}
	list, err := r.resolveServers(plan.list, r.tokens.env())
	if err != nil {
		return fmt.Errorf("readiness check failed, no trial ran:\n%w", err)
	}
	list, of, unchecked := r.dropTokenless(ctx, list, plan.of)
	listed, conns, err := servers.ReadyConns(ctx, list)
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return fmt.Errorf("readiness check failed, no trial ran:\n%w", err)
	}
	// Each stdio server checked here is the first trial's that starts it:
	// it starts once, not twice.
	r.keepWarm(list, conns)
	return plan.checkGraders(listed, of, unchecked)
}

// checkResults checks, for a worker that writes into the run's bucket
// itself, that its machine's identity may: before any server starts or
// any prompt is sent, so a refused identity costs no trial.
func (r *workerRun) checkResults(ctx context.Context) error {
	if err := r.w.ResultsError; err != nil {
		return fmt.Errorf("this worker cannot open the run's store, so no trial ran: %w", err)
	}
	if wc, ok := r.results.(store.WriteChecker); ok && r.b.Store != "" {
		if err := wc.CheckWrite(ctx); err != nil {
			return fmt.Errorf("this worker cannot write transcripts into the run's store, so no trial ran: %w", err)
		}
	}
	return nil
}

// readiness is what the readiness check connects to and checks: the
// servers of every variant, each once, and what the variants' graders
// name.
type readiness struct {
	list     []servers.Server
	of       []string // the variant of each server of list
	variants []string // every variant, in the bundle's order
	refs     map[string][]grade.PlacedRef
}

// readinessPlan gathers the servers and grader references of the
// bundle's variants.
func (r *workerRun) readinessPlan() *readiness {
	p := &readiness{refs: map[string][]grade.PlacedRef{}}
	seen := map[string]bool{}
	for _, set := range r.b.Settings {
		if _, ok := p.refs[set.Variant]; !ok {
			p.variants = append(p.variants, set.Variant)
		}
		p.refs[set.Variant] = append(p.refs[set.Variant], set.GraderRefs...)
		for _, s := range set.Servers {
			// A variant's case settings share its servers: check each once.
			id := set.Variant + "\x00" + s.Name
			if !seen[id] {
				seen[id] = true
				p.list = append(p.list, s)
				p.of = append(p.of, set.Variant)
			}
		}
	}
	return p
}

// checkClients checks what each client needs on this machine (an
// installed CLI), here for machines the coordinator could not look at.
func (r *workerRun) checkClients() error {
	var missing []error
	checked := map[string]bool{}
	for _, set := range r.b.Settings {
		id := set.Client + "\x00" + string(set.Options)
		if checked[id] {
			continue
		}
		checked[id] = true
		if def, err := r.w.Clients.Lookup(set.Client); err == nil {
			if err := preflight(def, set.Options); err != nil {
				missing = append(missing, fmt.Errorf("variant %s: %w", set.Variant, err))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("readiness check failed, no trial ran: this machine lacks what a client needs:\n%w", errors.Join(missing...))
	}
	return nil
}

// dropTokenless leaves out of list (of: the variant of each server) the
// connector servers the coordinator has no token for: the trials that use
// them error with the reason (cause server), and the rest run. unchecked
// are the variants that lost a server, whose graders are not checked.
func (r *workerRun) dropTokenless(ctx context.Context, list []servers.Server, of []string) (kept []servers.Server, keptOf []string, unchecked map[string]bool) {
	unchecked = map[string]bool{}
	kept, keptOf = list[:0:0], of[:0:0]
	for i, s := range list {
		if s.OAuth != nil {
			timeout := s.StartupTimeout
			if timeout <= 0 {
				timeout = servers.DefaultStartupTimeout
			}
			wctx, cancel := context.WithTimeout(ctx, timeout)
			_, err := s.Bearer(wctx)
			cancel()
			if err != nil {
				r.w.Logger.Warn("a connector server has no access token; its trials will error", "server", s.Name, "variant", of[i], "err", err)
				unchecked[of[i]] = true
				continue
			}
		}
		kept, keptOf = append(kept, s), append(keptOf, of[i])
	}
	return kept, keptOf, unchecked
}

// checkGraders checks that every tool and server each variant's graders
// name is one its servers listed (listed, of: the variant of each), but
// for the variants with no server listed or one left out (unchecked).
func (p *readiness) checkGraders(listed []servers.Listed, of []string, unchecked map[string]bool) error {
	have := map[string][]grade.ServerTools{}
	for i, l := range listed {
		have[of[i]] = append(have[of[i]], grade.ServerTools{Server: l.Server, Tools: l.Names()})
	}
	var errs []error
	for _, v := range p.variants {
		if len(have[v]) == 0 || unchecked[v] {
			continue
		}
		if err := grade.CheckRefs(v, p.refs[v], have[v]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("readiness check failed, no trial ran: graders name tools the servers do not have (graders name a tool as its server lists it):\n%w", errors.Join(errs...))
	}
	return nil
}

func (r *workerRun) caseByID(id string) *dataset.Case {
	for i := range r.b.Cases {
		if r.b.Cases[i].ID == id {
			return &r.b.Cases[i]
		}
	}
	return nil
}

// acquire asks the coordinator for room and waits for it. skip is set
// when the coordinator answered that the trial must not run, and why.
func (r *workerRun) acquire(ctx context.Context, key transcript.Key, set *Setting) (id int64, skip string, err error) {
	var providers, servers []string
	if set.Provider != "" {
		providers = []string{set.Provider}
	}
	for _, s := range set.Servers {
		servers = append(servers, s.Name)
	}
	return r.acquireRoom(ctx, key, providers, servers)
}

// acquireRoom sends an acquire for key, naming the providers and servers it
// takes room of, and waits for its granted.
func (r *workerRun) acquireRoom(ctx context.Context, key transcript.Key, providers, servers []string) (id int64, skip string, err error) {
	r.mu.Lock()
	r.nextID++
	id = r.nextID
	ch := make(chan struct{})
	r.grants[id] = ch
	r.mu.Unlock()
	a := &protocol.Acquire{ID: id, Key: key, Providers: providers, Servers: servers}
	if err := r.enc.Write(a); err != nil {
		return id, "", err
	}
	select {
	case <-ch:
		r.mu.Lock()
		skip = r.skips[id]
		delete(r.skips, id)
		r.mu.Unlock()
		return id, skip, nil
	case <-ctx.Done():
		return id, "", ctx.Err()
	}
}

// trial runs one trial and reports it. A trial that never got room (the
// run was cancelled first) writes nothing: it stays missing. A trial the
// coordinator skips opens no client: its transcript says skipped, and why.
func (r *workerRun) trial(ctx context.Context, pt Planned) {
	key := pt.Key
	set := &r.b.Settings[pt.Setting] // ReadBundle checked the index and the case
	c := r.caseByID(key.Case)
	id, skip, err := r.acquire(ctx, key, set)
	if err != nil {
		return
	}
	var t *transcript.Transcript
	if skip != "" {
		now := time.Now().UTC()
		t = &transcript.Transcript{
			Kind: "mst.transcript", Version: transcript.Version, Run: r.b.Run.ID, Key: key, Shard: r.b.Shard,
			Client: transcript.ClientInfo{Name: set.Client}, Model: set.Model, Prompt: c.Input,
			Environment: r.w.Environment,
			Timing:      transcript.Timing{Started: now, Ended: now},
			Outcome:     transcript.Outcome{Status: transcript.Skipped, Detail: skip},
		}
	} else {
		r.inFlight.Add(1)
		defer r.inFlight.Add(-1)
		t = r.runTrial(ctx, key, pt.Setting, c)
	}
	write := r.results.WriteTranscript
	if pt.Replace {
		write = r.results.ReplaceTranscript
	}
	path, werr := write(context.WithoutCancel(ctx), t)
	if errors.Is(werr, store.ErrExists) {
		// Another writer (a second worker, an earlier attempt) stored this
		// trial first: its transcript stands and this one is dropped, never
		// written over it. The trial is reported without a path, as not
		// stored by this worker; the run reads the stored one.
		r.w.Logger.Warn("another writer stored this trial's transcript first; that one stands and this one is dropped", "key", key)
		r.enc.Write(&protocol.Trial{Acquire: id, Key: key, Status: t.Outcome.Status, Cause: t.Outcome.Cause, DurationMs: t.Timing.DurationMs})
		return
	}
	if werr != nil {
		// The trial stays missing, but its room goes back.
		r.w.Logger.Error("writing transcript", "key", key, "err", werr)
		r.enc.Write(&protocol.Trial{Acquire: id, Key: key, Status: t.Outcome.Status, Cause: t.Outcome.Cause, DurationMs: t.Timing.DurationMs})
		return
	}
	r.mu.Lock()
	r.tally.Add(t.Outcome.Status)
	r.mu.Unlock()
	r.done.Add(1)
	r.enc.Write(&protocol.Trial{Acquire: id, Key: key, Status: t.Outcome.Status, Cause: t.Outcome.Cause, Path: path, DurationMs: t.Timing.DurationMs})
}

// runTrial drives the client for one trial under MST's rules: the timeout
// runs from the prompt to the transcript, setup excluded; a run cancelled
// meanwhile makes the trial cancelled.
func (r *workerRun) runTrial(ctx context.Context, key transcript.Key, setting int, c *dataset.Case) *transcript.Transcript {
	set := &r.b.Settings[setting]
	t := &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Run: r.b.Run.ID, Key: key, Shard: r.b.Shard,
		Client: transcript.ClientInfo{Name: set.Client, Version: r.w.builtinVersion(set.Client)}, Model: set.Model, Prompt: c.Input,
		Environment: r.w.Environment,
	}
	clock := trialClock{setup: time.Now()}
	p, sess, release, err := r.openSession(ctx, setting)
	if release != nil {
		// This machine's turn is held until the trial's diagnosis and
		// reset are done (deferred first, so released last).
		defer release()
	}
	clock.begin(t)
	if err != nil {
		t.Outcome = openFailure(ctx, err)
		return clock.finish(t)
	}
	trial := client.Trial{Key: key, Prompt: c.Input, Metadata: c.Metadata}
	var proxies *mcpproxy.Set
	if p.proxied != nil {
		proxies, err = r.openTrialProxies(ctx, key, p, set, &trial)
		if err != nil {
			p.put(ctx, sess, client.Continue, r.w.Logger)
			t.Outcome = openFailure(ctx, err)
			if ctx.Err() == nil {
				t.Outcome.Detail = "starting the servers: " + err.Error()
			}
			return clock.finish(t)
		}
		// The servers start before the prompt: setup, as opening is.
		clock.begin(t)
	}
	run := r.runTimed(ctx, sess.session, trial, set.Timeout)
	var ev *mcpproxy.Evidence
	if proxies != nil {
		ev = r.stopProxies(proxies)
		defer func() { mcpproxy.Merge(t, *ev, !run.abandoned && run.err == nil) }()
	}
	if run.abandoned {
		// The session may still be running the trial: nothing of it is
		// read, and it is closed (in the background: a client that
		// ignores its context may ignore Close too).
		t.Outcome = r.abandonedOutcome(ctx, set.Timeout, run.deadline, ev)
		go p.drop(sess)
		return clock.finish(t)
	}
	next := recordResult(ctx, t, set.Timeout, run, ev)
	clock.finish(t)
	r.putBack(ctx, t, p, sess, next)
	return t
}

// trialClock times a trial: its setup from when it began, the trial
// itself from when its setup ended (begin) to its end (finish).
type trialClock struct{ setup, start time.Time }

// begin ends the trial's setup: its clock starts now. Called again, it
// moves the start to now, setup counting up to it.
func (k *trialClock) begin(t *transcript.Transcript) {
	t.Timing.SetupMs = ms(time.Since(k.setup))
	k.start = time.Now()
	t.Timing.Started = k.start.UTC()
}

// finish stops the trial's clock, and returns t.
func (k *trialClock) finish(t *transcript.Transcript) *transcript.Transcript {
	end := time.Now()
	t.Timing.Ended = end.UTC()
	t.Timing.DurationMs = ms(end.Sub(k.start))
	return t
}

// openSession gets a session of the setting's pool for one trial. A
// client whose definition says OneTrialPerMachine (one app, one
// conversation) first waits for this machine's turn, before the trial's
// clock starts; release, when not nil, ends that turn, even when err is
// set.
func (r *workerRun) openSession(ctx context.Context, setting int) (p *pool, sess *pooled, release func(), err error) {
	p, err = r.pool(setting)
	if err == nil && p.def.OneTrialPerMachine {
		release, err = r.machineTurn(ctx, p.def.Name)
	}
	if err == nil {
		sess, err = p.get(ctx)
	}
	return p, sess, release, err
}

// openTrialProxies starts the trial's servers behind MST's proxies
// (openProxies) and hands them to the trial: their connections to a
// client that runs in this process, else their endpoints and the tools
// they offer.
func (r *workerRun) openTrialProxies(ctx context.Context, key transcript.Key, p *pool, set *Setting, trial *client.Trial) (*mcpproxy.Set, error) {
	proxies, err := r.openProxies(ctx, key, p.proxied, p.maxCalls, set.CallLimits)
	if err != nil {
		return nil, err
	}
	if p.def.InProcessServers {
		trial.Conns = proxies.Conns() // no MCP hop for a client in this process
	} else {
		trial.Servers = proxies.Servers()
		trial.Tools = proxies.Offered()
	}
	return proxies, nil
}

// sessionRun is how a trial's run on its session ended.
type sessionRun struct {
	res       client.Result
	err       error
	abandoned bool      // the client ignored the trial's end (runSession)
	timedOut  bool      // the trial's timeout passed while the run went on
	deadline  time.Time // when the timeout was to pass; zero without one
}

// runTimed runs the trial on its session under the setting's timeout
// (none when zero).
func (r *workerRun) runTimed(ctx context.Context, s client.Session, trial client.Trial, timeout time.Duration) sessionRun {
	tctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		tctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	var run sessionRun
	run.res, run.err, run.abandoned = r.runSession(tctx, s, trial)
	run.timedOut = tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	run.deadline, _ = tctx.Deadline()
	return run
}

// stopProxies takes the record of a trial's proxies, the trial being
// over, and stops them in the background (a server may take seconds to
// go), off the trial's time and the next trial's way; the run waits for
// them before it reports done.
func (r *workerRun) stopProxies(proxies *mcpproxy.Set) *mcpproxy.Evidence {
	ev := new(proxies.Evidence())
	r.closing.Go(func() { proxies.Close() })
	return ev
}

// abandonedOutcome is the outcome of a trial whose client did not stop
// within the abandon grace after the trial's end: timed out (from what it
// was waiting on, ev), or cancelled when the run was interrupted.
func (r *workerRun) abandonedOutcome(ctx context.Context, timeout time.Duration, deadline time.Time, ev *mcpproxy.Evidence) transcript.Outcome {
	o := timeoutOutcome(timeout, deadline, ev, "")
	o.Detail += fmt.Sprintf(", and the client did not stop within %s after it: its session was closed", r.abandonGrace())
	if ctx.Err() != nil {
		o = transcript.Outcome{Status: transcript.Cancelled, Detail: fmt.Sprintf("the run was interrupted during this trial, and the client did not stop within %s: its session was closed", r.abandonGrace())}
	}
	return o
}

// recordResult puts what the session returned into t, and decides the
// trial's outcome: cancelled when the run was interrupted, timed out (see
// timeoutOutcome), errored with the session's error, else the client's
// own. next is what the session needs before its next trial: at least a
// reset after a timeout or an error.
func recordResult(ctx context.Context, t *transcript.Transcript, timeout time.Duration, run sessionRun, ev *mcpproxy.Evidence) (next client.Next) {
	res := run.res
	t.Servers, t.Messages, t.ToolCalls, t.Answer, t.Usage = res.Servers, res.Messages, res.ToolCalls, res.Answer, res.Usage
	if res.ClientVersion != "" {
		t.Client.Version = res.ClientVersion
	}
	t.ClientTelemetry = res.ClientTelemetry
	t.Outcome = res.Outcome
	next = res.Next
	switch {
	case ctx.Err() != nil:
		t.Outcome = transcript.Outcome{Status: transcript.Cancelled, Detail: "the run was interrupted during this trial"}
	case run.timedOut:
		t.Outcome = timeoutOutcome(timeout, run.deadline, ev, res.WaitingOn)
		next = max(next, client.Reset)
	case run.err != nil:
		t.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: causeOf(run.err), Detail: run.err.Error()}
		next = max(next, client.Reset)
	case t.Outcome.Status == "":
		t.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: "the client returned no outcome"}
	}
	return next
}

// putBack gives a trial's session back to its pool with what it needs
// next. One policy for every client: a trial that errored or timed out is
// diagnosed first (when the session can), before the reset it gets.
func (r *workerRun) putBack(ctx context.Context, t *transcript.Transcript, p *pool, sess *pooled, next client.Next) {
	if t.Outcome.Status == transcript.Errored || t.Outcome.Status == transcript.TimedOut {
		if d, ok := sess.session.(client.Diagnoser); ok {
			t.ClientTelemetry = withDiagnosis(ctx, t.ClientTelemetry, d)
		}
	}
	p.put(ctx, sess, next, r.w.Logger)
}

// timeoutOutcome is the outcome of a trial whose timeout passed at
// deadline, from what it was waiting on then: a tool call in flight on one
// of its servers (the proxies' record, ev, which may be nil), else what the
// client says (client.Result.WaitingOn). A trial that waited on a tool or
// on the client timed out, and is graded; one that waited on the model
// provider is errored (cause provider): the provider failed, not the
// variant.
func timeoutOutcome(timeout time.Duration, deadline time.Time, ev *mcpproxy.Evidence, clientSays string) transcript.Outcome {
	if ev != nil {
		calls := slices.Clone(ev.InFlight)
		for _, c := range ev.Calls {
			end := c.Started.Add(time.Duration(c.DurationMs * float64(time.Millisecond)))
			if !c.Started.After(deadline) && !end.Before(deadline) {
				calls = append(calls, c)
			}
		}
		if len(calls) > 0 {
			c := calls[0]
			return transcript.Outcome{Status: transcript.TimedOut, WaitingOn: transcript.WaitingTool,
				Detail: fmt.Sprintf("no answer within the timeout (%s): the trial was waiting on tool %s of server %s", timeout, transcript.Printable(c.Tool), transcript.Printable(c.Server))}
		}
	}
	switch clientSays {
	case transcript.WaitingModel:
		return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseProvider, WaitingOn: transcript.WaitingModel,
			Detail: fmt.Sprintf("the model provider did not answer within the trial's timeout (%s)", timeout)}
	case transcript.WaitingTool:
		return transcript.Outcome{Status: transcript.TimedOut, WaitingOn: transcript.WaitingTool,
			Detail: fmt.Sprintf("no answer within the timeout (%s): the trial was waiting on one of the client's own tools", timeout)}
	}
	return transcript.Outcome{Status: transcript.TimedOut, WaitingOn: transcript.WaitingClient,
		Detail: fmt.Sprintf("no answer within the timeout (%s): the client was busy, with no model request or tool call in flight that it or MST saw", timeout)}
}

// machineTurn waits for this machine's turn to run a trial of client (a
// client.Definition.OneTrialPerMachine one) and returns its release.
func (r *workerRun) machineTurn(ctx context.Context, client string) (func(), error) {
	r.mu.Lock()
	if r.turns == nil {
		r.turns = map[string]chan struct{}{}
	}
	turn := r.turns[client]
	if turn == nil {
		turn = make(chan struct{}, 1)
		r.turns[client] = turn
	}
	r.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// openProxies starts the trial's servers behind MST's proxies. Each call
// that reaches a server in callLimits first gets a place from the
// coordinator (see acquireCall).
func (r *workerRun) openProxies(ctx context.Context, key transcript.Key, list []servers.Server, maxCalls int, callLimits map[string]int) (*mcpproxy.Set, error) {
	host, err := r.proxyHost()
	if err != nil {
		return nil, err
	}
	o := mcpproxy.Options{Trial: key.String(), MaxCalls: maxCalls, Take: r.takeWarm}
	if len(callLimits) > 0 {
		o.Acquire = func(ctx context.Context, server string) (func(), error) {
			if _, limited := callLimits[server]; !limited {
				return func() {}, nil
			}
			return r.acquireCall(ctx, server)
		}
	}
	return host.Open(ctx, list, o)
}

// acquireCall asks the coordinator for a place for one tool call to
// server and waits for it, or for ctx. The release it returns gives the
// place back. A call that stops waiting (ctx ended) leaves a note, so the
// grant that comes later is given back at once.
func (r *workerRun) acquireCall(ctx context.Context, server string) (release func(), err error) {
	r.mu.Lock()
	r.nextCallID++
	id := r.nextCallID
	ch := make(chan string, 1) // the grant's Refused
	if r.callGrants == nil {
		r.callGrants = map[int64]chan string{}
	}
	r.callGrants[id] = ch
	r.mu.Unlock()
	if err := r.enc.Write(&protocol.AcquireCall{ID: id, Server: server}); err != nil {
		r.mu.Lock()
		delete(r.callGrants, id)
		r.mu.Unlock()
		return nil, err
	}
	select {
	case refused := <-ch:
		if refused != "" {
			return nil, errors.New(refused)
		}
		var once sync.Once
		return func() { once.Do(func() { r.enc.Write(&protocol.ReleaseCall{ID: id}) }) }, nil
	case <-ctx.Done():
	}
	r.mu.Lock()
	if _, waiting := r.callGrants[id]; waiting {
		delete(r.callGrants, id)
		if r.callsGaveUp == nil {
			r.callsGaveUp = map[int64]bool{}
		}
		r.callsGaveUp[id] = true
		r.mu.Unlock()
		return nil, ctx.Err()
	}
	r.mu.Unlock()
	// The grant came as the wait ended: give its place back.
	if refused := <-ch; refused == "" {
		r.enc.Write(&protocol.ReleaseCall{ID: id})
	}
	return nil, ctx.Err()
}

// runSession runs one trial on a session. When tctx ends and the session
// has not returned AbandonGrace later, it gives up on it: abandoned is true
// and res and err are empty.
func (r *workerRun) runSession(tctx context.Context, s client.Session, tr client.Trial) (res client.Result, err error, abandoned bool) {
	type ran struct {
		res client.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := s.Run(tctx, tr)
		done <- ran{res, err}
	}()
	select {
	case d := <-done:
		return d.res, d.err, false
	case <-tctx.Done():
	}
	grace := time.NewTimer(r.abandonGrace())
	defer grace.Stop()
	select {
	case d := <-done:
		return d.res, d.err, false
	case <-grace.C:
		r.w.Logger.Warn("a client ignored the end of its trial; its session is closed", "trial", tr.Key.String(), "grace", r.abandonGrace())
		return client.Result{}, nil, true
	}
}

func (r *workerRun) abandonGrace() time.Duration {
	if r.w.AbandonGrace > 0 {
		return r.w.AbandonGrace
	}
	return AbandonGrace
}

// DiagnoseTimeout bounds a session's Diagnose.
const DiagnoseTimeout = 30 * time.Second

func withDiagnosis(ctx context.Context, tel map[string]any, d client.Diagnoser) map[string]any {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DiagnoseTimeout)
	defer cancel()
	diag, err := d.Diagnose(dctx)
	if tel == nil {
		tel = map[string]any{}
	}
	if err != nil {
		tel["diagnosis"] = map[string]any{"error": err.Error()}
	} else {
		tel["diagnosis"] = diag
	}
	return tel
}

func openFailure(ctx context.Context, err error) transcript.Outcome {
	if ctx.Err() != nil {
		return transcript.Outcome{Status: transcript.Cancelled, Detail: "the run was interrupted before this trial started"}
	}
	return transcript.Outcome{Status: transcript.Errored, Cause: causeOf(err), Detail: "opening the client: " + err.Error()}
}

// causeOf says which part an error came from.
func causeOf(err error) string {
	if errors.Is(err, servers.ErrServer) {
		return transcript.CauseServer
	}
	return transcript.CauseClient
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (r *workerRun) counts() transcript.Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.tally
	c.Planned = r.b.Size()
	c.Missing = c.Planned - c.Done()
	return c
}

// pool returns the sessions of one fixed setting. Different settings never
// share a session.
func (r *workerRun) pool(setting int) (*pool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pools == nil {
		r.pools = map[int]*pool{}
	}
	if p, ok := r.pools[setting]; ok {
		return p, nil
	}
	set := &r.b.Settings[setting]
	def, err := r.w.Clients.Lookup(set.Client)
	if err != nil {
		return nil, err
	}
	env := r.tokens.env()
	srvs, err := r.resolveServers(set.Servers, env)
	if err != nil {
		return nil, err
	}
	p := &pool{def: def, params: client.OpenParams{
		Variant: set.Variant, Model: set.Model, Options: set.Options, Servers: srvs,
		Timeout: set.Timeout, KeyEnv: set.KeyEnv,
		Env: env, Environment: r.w.Environment, Logger: r.w.Logger.With("variant", set.Variant), WorkDir: r.w.WorkDir,
	}}
	if def.ProxiedServers && len(srvs) > 0 {
		// The proxy holds the servers (and their secrets); the client
		// gets their names here and the proxies' endpoints per trial.
		p.proxied = srvs
		p.params.Proxied = true
		if def.ToolCallLimit != nil {
			p.maxCalls = def.ToolCallLimit(set.Options)
		}
		p.params.Servers = make([]servers.Server, len(srvs))
		for i, s := range set.Servers {
			p.params.Servers[i] = s.Declaration()
		}
	}
	r.pools[setting] = p
	return p, nil
}

// resolveServers returns list with the ${secret:NAME} references of each
// server's env and headers replaced by the values the coordinator sent
// (values), in memory: the bundle keeps the references. A connector
// server gets a Bearer that gives its access token as the worker holds
// it at each request.
func (r *workerRun) resolveServers(list []servers.Server, values map[string]string) ([]servers.Server, error) {
	out := make([]servers.Server, len(list))
	for i, s := range list {
		res, err := s.Resolve(func(name string) (string, bool) {
			v, ok := values[name]
			return v, ok
		})
		if err != nil {
			return nil, err
		}
		if s.OAuth != nil {
			name := s.OAuth.Token
			res.Bearer = func(ctx context.Context) (string, error) { return r.tokens.bearer(ctx, name) }
			res.BearerRejected = func(value string) { r.tokens.reject(name, value) }
		}
		out[i] = res
	}
	return out, nil
}

// askConnectors asks the coordinator for the access tokens of the
// bundle's connector servers, which the readiness check and the trials
// then wait for.
func (r *workerRun) askConnectors() {
	var names, srvs []string
	for _, set := range r.b.Settings {
		for _, s := range set.Servers {
			if s.OAuth != nil && !slices.Contains(names, s.OAuth.Token) {
				names = append(names, s.OAuth.Token)
				srvs = append(srvs, s.Name)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	r.tokens.expect(names)
	if err := r.enc.Write(&protocol.NeedTokens{Servers: srvs, Names: names}); err != nil {
		r.w.Logger.Warn("asking for the connector servers' tokens failed", "servers", srvs, "err", err)
	}
}

func (r *workerRun) closeSessions() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, p := range r.pools {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}

// each calls fn for the items in order, at most conc at once, and returns
// once every call it made has returned. Once ctx ends it starts no more.
func each[T any](ctx context.Context, items iter.Seq[T], conc int, fn func(T)) {
	slots := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for it := range items {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			fn(it)
		})
	}
	wg.Wait()
}
