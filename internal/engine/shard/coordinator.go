package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// ErrWorkerLost means a worker's channel ended, or the worker stayed
// silent too long, before it sent done.
var ErrWorkerLost = errors.New("worker lost")

// Events receive what the coordinator learns from workers. Methods are
// called from the goroutine serving each shard, so several at once.
type Events interface {
	// Trial is called when a worker reports a finished trial. data is the
	// transcript's bytes as fetched back from the worker's machine, or nil
	// when the worker wrote it into the run's store itself (Serve was given
	// no fetch). Calls for one shard come one at a time, in the order the
	// worker reported the trials, from a goroutine of that shard's; calls
	// for several shards come at once.
	Trial(shard int, m *protocol.Trial, data []byte)
}

// Reporter is implemented by Events that count a trial as soon as its
// worker reports it: Reported is called in the shard's message loop, in
// order, before the trial's transcript is fetched and before the shard's
// next message is read (so before its next trial can be granted). Trial
// is still called once the transcript is back.
type Reporter interface {
	Reported(shard int, m *protocol.Trial)
}

// GradeEvents receive what grade shards report. Graded is called as
// Events.Trial is: in order for each shard, several shards at once; data is the grade's
// bytes as fetched back from the worker's machine (grade.TrialGrade as
// JSON), which the receiver must check like any input from a worker.
type GradeEvents interface {
	Graded(shard int, m *protocol.Graded, data []byte)
}

// Gate decides whether a trial a worker asks room for runs at all. Admit
// returns "" to let it run, or the reason it is skipped. It is called from
// the goroutines serving shards, several at once, as acquires arrive.
type Gate interface {
	Admit(key transcript.Key) (skip string)
}

// Coordinator is the coordinator's side of mst.shard/v1 for one run: it
// checks hello, grants room under the limits, and passes trial reports on.
// One Coordinator serves every shard of a run.
type Coordinator struct {
	MSTVersion string
	Limits     *Limiter
	Events     Events
	// Grades receives the grades of grade shards (Bundle.Work grade).
	Grades GradeEvents
	Logger *slog.Logger
	// Silence is how long a worker may send nothing before it is lost (60s
	// when zero).
	Silence time.Duration
	// Secrets are sent to every worker in a tokens message right after its
	// hello: the only way keys reach a worker. Every token TokenSource
	// hands out is added to it, so the run's redaction covers it.
	Secrets *secrets.Set
	// TokenSource answers workers' need-tokens messages. When nil, workers
	// get only Secrets, and need-tokens is answered with nothing. A
	// Coordinator with a TokenSource needs Secrets.
	TokenSource TokenSource
	// Gate, when set, is asked about every acquire as it arrives, before
	// any room is taken, and once more when the room was found (a variant
	// may have been stopped while the trial waited). A trial it skips gets
	// a Granted with Skip set and holds no room; a trial already granted
	// runs to its end.
	Gate Gate
	// Bundles, when set, are the bundles the run's shards were given,
	// found by their Shard. Serve then refuses an acquire or a trial whose
	// key is not one of its shard's planned trials (another shard's case,
	// an unknown variant, a trial number out of range), and hands the
	// shard's bundle to CheckHello.
	Bundles []*Bundle
	// CheckHello, when set, is asked about every hello whose versions
	// match, before tokens are sent: the load-time checks that depend on
	// the worker's machine (its OS), which could not run before the worker
	// said what it runs on. b is the shard's bundle, nil when Bundles does
	// not hold it. An error refuses the worker: Serve sends cancel, starts
	// nothing, and fails the shard with the error.
	CheckHello func(b *Bundle, h *protocol.Hello) error
}

// ReasonRefused is the reason of the cancel a worker gets when CheckHello
// refuses its machine.
const ReasonRefused = "refused: this machine cannot run the shard"

// ReasonVersionMismatch is the reason of the cancel a worker gets when its
// hello names another protocol or MST version.
const ReasonVersionMismatch = "version mismatch"

// Fetch returns the bytes of one file the worker wrote, by the path its
// trial message gave (relative to the worker's results). Runners whose
// workers write on another machine give one to Serve; nil means the worker
// writes into the run's store itself. Serve bounds each fetch and detaches
// it from a cancel, so a fetch need not.
type Fetch func(ctx context.Context, path string) ([]byte, error)

// CopyBackTimeout bounds the copy of one transcript back from a worker.
const CopyBackTimeout = 2 * time.Minute

// ShardResult is how a shard ended.
type ShardResult struct {
	Hello *protocol.Hello
	Done  *protocol.Done
}

// Serve speaks the protocol with one worker: it reads the worker's stdout
// from in and writes to its stdin through out. It returns when the worker
// sends done, or with ErrWorkerLost when the channel ends or goes silent
// first. When ctx ends, it sends cancel and goes on reading until done.
//
// Before reporting a trial, Serve copies its transcript back with fetch
// (beside its message loop, CopyConcurrency at a time, reported in order),
// trying twice; a transcript that cannot be copied stays missing. It
// answers each need-tokens message through c.TokenSource, from a goroutine
// of its own.
func (c *Coordinator) Serve(ctx context.Context, shard int, in io.Reader, out io.Writer, fetch Fetch) (ShardResult, error) {
	if c.TokenSource != nil && c.Secrets == nil {
		return ShardResult{}, errors.New("shard: a coordinator with a token source needs Secrets, to redact the tokens it hands out")
	}
	s := c.newShardSession(shard, out)
	stop := make(chan struct{})
	defer close(stop)
	msgs, errc := readMessages(in, stop)
	defer s.close()
	var stopGrants, stopTokens context.CancelFunc
	s.grantCtx, stopGrants = context.WithCancel(context.WithoutCancel(ctx))
	defer stopGrants()
	s.tokenCtx, stopTokens = context.WithCancel(ctx)
	defer stopTokens()
	// Copies back run beside the session's read loop; Serve returns once
	// they are done, so every trial reported before the end is delivered.
	if fetch != nil {
		s.copies = newCopier(ctx, c, fetch, s.logger, shard)
		defer s.copies.wait()
	}
	err := s.serve(ctx, msgs, errc)
	return s.res, err
}

// callPhase is where a call ID stands, as a session's read loop saw it.
type callPhase int

const (
	callUnknown  callPhase = iota // never read
	callWaiting                   // read, maybe granted since (see shardSession.heldCalls)
	callRefused                   // answered with a refusal
	callReleased                  // granted and given back
)

// refuseRelease says why a release-call that holds no place is refused.
func refuseRelease(calls map[int64]callPhase, id int64) string {
	switch calls[id] {
	case callReleased:
		return "the call was released before"
	case callWaiting:
		return "its call acquire was not granted yet"
	case callRefused:
		return "its call acquire was refused"
	}
	return "no call acquire with this id was read"
}

// bundleServers returns the servers the bundle's settings use, by name;
// nil for no bundle.
func bundleServers(b *Bundle) map[string]bool {
	if b == nil {
		return nil
	}
	out := map[string]bool{}
	for _, set := range b.Settings {
		for _, s := range set.Servers {
			out[s.Name] = true
		}
	}
	return out
}

// refuseAcquire says why an acquire is refused, or "" to go on: an ID in
// use or not positive, a key that is not one of the shard's planned trials
// (when the coordinator knows them), a key acquired before.
func refuseAcquire(m *protocol.Acquire, acquired map[int64]transcript.Key, trials *trialSet, shard int) string {
	_, running := acquired[m.ID]
	switch {
	case m.ID <= 0:
		return fmt.Sprintf("its id %d is not a positive number", m.ID)
	case running:
		return fmt.Sprintf("its id %d is the id of an acquire still running", m.ID)
	case !trials.planned(m.Key):
		return fmt.Sprintf("it names a trial that is not one of shard %d's", shard)
	case trials.has(m.Key, trialTaken):
		return "the worker acquired this trial before"
	}
	return ""
}

// refuseTrial says why a trial report is refused, or "" to take it: a key
// that is not one of the shard's planned trials, a trial reported before,
// an acquire that was never answered with granted or was for another
// trial.
func refuseTrial(m *protocol.Trial, acquired map[int64]transcript.Key, wasGranted bool, trials *trialSet, shard int) string {
	k, ok := acquired[m.Acquire]
	switch {
	case !trials.planned(m.Key):
		return fmt.Sprintf("it names a trial that is not one of shard %d's; nothing is stored", shard)
	case trials.has(m.Key, trialReported):
		return "the trial was reported before; the first report stands"
	case !ok || !wasGranted:
		return fmt.Sprintf("its acquire %d was never granted; the trial stays missing", m.Acquire)
	case k != m.Key:
		return fmt.Sprintf("its acquire %d was for another trial, %s; the trial stays missing", m.Acquire, clip(k.String()))
	}
	return ""
}

// safePath reports whether a path from a trial or graded message is one
// the coordinator may fetch: a clean relative path under dir (transcripts/
// or grades/) of the worker's results, as the worker's store names it
// (names path-escaped, so printable ASCII without a backslash), each
// element a valid file name.
func safePath(p, dir string) bool {
	if !fs.ValidPath(p) || !strings.HasPrefix(p, dir) || !strings.HasSuffix(p, ".json") || len(p) > 4096 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	for elem := range strings.SplitSeq(p, "/") {
		if len(elem) > 255 {
			return false
		}
	}
	return true
}

// clip bounds a text from a worker for the log.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// fetch copies one transcript back, trying twice, each try bounded by
// CopyBackTimeout. It runs on a context of its own: a trial reported after
// Ctrl-C is still worth keeping.
func (c *Coordinator) fetch(ctx context.Context, fetch Fetch, path string, logger *slog.Logger, shard int, trial string) ([]byte, bool) {
	try := func() ([]byte, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CopyBackTimeout)
		defer cancel()
		return fetch(fctx, path)
	}
	data, err := try()
	if err != nil {
		data, err = try()
	}
	if err != nil {
		msg := "copying a transcript back failed twice; the trial stays missing"
		if strings.HasPrefix(path, "grades/") {
			msg = "copying a grade back failed twice; the trial stays ungraded"
		}
		logger.Warn(msg, "shard", shard, "trial", trial, "err", err)
		return nil, false
	}
	return data, true
}

// Limiter holds the eval's limits per provider and per server across every
// shard of a run: trials in flight, and (WithServerCalls) tool calls in
// flight per server.
type Limiter struct {
	sems map[string]*semaphore
}

// NewLimiter returns a limiter with caps per provider and per server. A
// name without a cap is not limited.
func NewLimiter(providers, servers map[string]int) *Limiter {
	l := &Limiter{sems: map[string]*semaphore{}}
	for name, n := range providers {
		l.sems["provider:"+name] = newSemaphore(n)
	}
	for name, n := range servers {
		l.sems["server:"+name] = newSemaphore(n)
	}
	return l
}

// WithServerCalls adds caps on tool calls in flight per server across
// every shard (limits.serverCalls), apart from the caps on trials, and
// returns l. Call it before the limiter is used.
func (l *Limiter) WithServerCalls(servers map[string]int) *Limiter {
	for name, n := range servers {
		l.sems["call:"+name] = newSemaphore(n)
	}
	return l
}

// acquireCall takes a place for one tool call to server; nil when its
// calls have no cap.
func (l *Limiter) acquireCall(ctx context.Context, server string) (*semaphore, error) {
	if l == nil {
		return nil, nil
	}
	s := l.sems["call:"+server]
	if s == nil {
		return nil, nil
	}
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// acquire takes room for a trial, in a fixed order so two trials never
// wait on each other.
func (l *Limiter) acquire(ctx context.Context, providers, servers []string) ([]*semaphore, error) {
	if l == nil {
		return nil, nil
	}
	var names []string
	for _, p := range providers {
		names = append(names, "provider:"+p)
	}
	for _, s := range servers {
		names = append(names, "server:"+s)
	}
	sort.Strings(names)
	names = slices.Compact(names)
	var got []*semaphore
	for _, n := range names {
		s := l.sems[n]
		if s == nil {
			continue
		}
		if err := s.acquire(ctx); err != nil {
			for _, g := range got {
				g.release()
			}
			return nil, err
		}
		got = append(got, s)
	}
	return got, nil
}

type semaphore struct{ ch chan struct{} }

func newSemaphore(n int) *semaphore { return &semaphore{ch: make(chan struct{}, max(n, 1))} }

func (s *semaphore) acquire(ctx context.Context) error {
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *semaphore) release() { <-s.ch }
