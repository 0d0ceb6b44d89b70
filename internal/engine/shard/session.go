package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/transcript"
)

// shardSession is the coordinator's side of one worker's connection, as
// Serve runs it: what is known of the worker's shard and what the worker
// asked for and reported, with one method per message a worker sends
// (handle). Its read loop (serve) owns every field but those
// under mu, which the goroutines that wait for room and call places
// write too.
type shardSession struct {
	c       *Coordinator
	shard   int
	logger  *slog.Logger
	enc     *protocol.Encoder
	bundle  *Bundle         // the shard's bundle; nil when c.Bundles does not hold it
	grading bool            // a grade shard: it reports graded, never trial
	used    map[string]bool // the servers the shard's variants use; nil without a bundle
	// copies copies reported files back beside the read loop; nil when the
	// worker writes into the run's store itself.
	copies *copier
	// grantCtx bounds the waits for room and call places (it ends when
	// Serve returns, not on a cancel); tokenCtx bounds the answers to
	// need-tokens.
	grantCtx, tokenCtx context.Context

	res ShardResult // the worker's hello and done, once read

	// What the worker asked for and reported, to refuse reports that were
	// never granted, come twice or name a trial of another shard. Each
	// holds an acquire only until its trial is reported, so what grows with
	// the shard's trials is trials alone (trialset.go).
	trials   *trialSet
	acquired map[int64]transcript.Key // acquires read, until their trial
	calls    map[int64]callPhase      // the phase of every call ID read

	mu        sync.Mutex
	closed    bool                   // set when Serve returns; late grants give their room back
	granted   map[int64]bool         // acquires answered with granted, until their trial
	held      map[int64][]*semaphore // the room of granted acquires, until their trial
	heldCalls map[int64]*semaphore   // the places of granted calls not given back yet
}

// newShardSession starts the session of one shard, writing to its worker
// through out.
func (c *Coordinator) newShardSession(shard int, out io.Writer) *shardSession {
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	bundle := c.bundleOf(shard)
	return &shardSession{
		c:         c,
		shard:     shard,
		logger:    logger,
		enc:       protocol.NewEncoder(out),
		bundle:    bundle,
		grading:   bundle != nil && bundle.Work == WorkGrade,
		used:      bundleServers(bundle),
		trials:    newTrialSet(bundle),
		acquired:  map[int64]transcript.Key{},
		calls:     map[int64]callPhase{},
		granted:   map[int64]bool{},
		held:      map[int64][]*semaphore{},
		heldCalls: map[int64]*semaphore{},
	}
}

// bundleOf returns the bundle of shard among c.Bundles (the last one, if
// several claim it), or nil.
func (c *Coordinator) bundleOf(shard int) *Bundle {
	var bundle *Bundle
	for _, b := range c.Bundles {
		if b != nil && b.Shard == shard {
			bundle = b
		}
	}
	return bundle
}

// errShardDone is what the done handler returns when the worker ended
// without an error: the session ends, and Serve returns no error.
var errShardDone = errors.New("the worker said done")

// handle passes one message from the worker to the session's method for
// it; any other message (one the coordinator sends, say) is unexpected.
func (s *shardSession) handle(m any) error {
	switch m := m.(type) {
	case *protocol.Hello:
		return s.hello(m)
	case *protocol.Acquire:
		return s.acquire(m)
	case *protocol.AcquireCall:
		return s.acquireCall(m)
	case *protocol.ReleaseCall:
		return s.releaseCall(m)
	case *protocol.NeedTokens:
		return s.needTokens(m)
	case *protocol.Trial:
		return s.trial(m)
	case *protocol.Graded:
		return s.graded(m)
	case *protocol.Heartbeat:
		return s.heartbeat(m)
	case *protocol.Done:
		return s.done(m)
	}
	return s.unexpected(m)
}

// readMessages reads the worker's messages from in on a goroutine of its
// own and hands them over one at a time, until a read fails (its error
// comes on the error channel) or stop closes.
func readMessages(in io.Reader, stop <-chan struct{}) (<-chan any, <-chan error) {
	msgs := make(chan any)
	errc := make(chan error, 1)
	go func() {
		dec := protocol.NewDecoder(in)
		for {
			m, err := dec.Read()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-stop:
				return
			}
		}
	}()
	return msgs, errc
}

// serve is the session's read loop: it hands each message to its handler
// until one ends the session, and ends it itself when the channel fails,
// the worker stays silent past c.Silence or its files cannot be copied
// back. When ctx ends it sends cancel and goes on.
func (s *shardSession) serve(ctx context.Context, msgs <-chan any, errc <-chan error) error {
	silence := s.c.Silence
	if silence <= 0 {
		silence = 60 * time.Second
	}
	timer := time.NewTimer(silence)
	defer timer.Stop()
	var copiesFailed <-chan struct{}
	if s.copies != nil {
		copiesFailed = s.copies.failed
	}
	done := ctx.Done()
	for {
		select {
		case <-done:
			done = nil
			s.enc.Write(&protocol.Cancel{Reason: "the run was interrupted"})
		case <-copiesFailed:
			s.enc.Write(&protocol.Cancel{Reason: "the coordinator cannot copy this worker's files back"})
			return fmt.Errorf("shard %d: %d files in a row could not be copied back from the worker's machine (see the warnings above), so the shard was stopped: its remaining trials stay missing, and a resume runs them", s.shard, CopyFailureLimit)
		case <-timer.C:
			return fmt.Errorf("shard %d: %w: the worker sent nothing for %s", s.shard, ErrWorkerLost, silence)
		case err := <-errc:
			return s.readFailed(err)
		case m := <-msgs:
			timer.Reset(silence)
			if err := s.handle(m); err != nil {
				if errors.Is(err, errShardDone) {
					return nil
				}
				return err
			}
		}
	}
}

// readFailed is the error that ends a session whose channel failed: the
// worker was lost, or it wrote what is not the protocol.
func (s *shardSession) readFailed(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("shard %d: %w: its channel closed before it said done", s.shard, ErrWorkerLost)
	}
	if errors.Is(err, protocol.ErrBadLine) || errors.Is(err, protocol.ErrUnknownMessage) {
		// The channel works, but what the worker wrote is not the
		// protocol: the worker failed, it was not lost.
		return fmt.Errorf("shard %d: the worker wrote a line that is not %s (its stdout carries protocol lines only; logs belong on stderr): %w", s.shard, protocol.Protocol, err)
	}
	return fmt.Errorf("shard %d: %w: %w", s.shard, ErrWorkerLost, err)
}

// close ends the session when Serve returns: grants that come later give
// their room back, and the room and call places the worker still holds
// (lost, failed or done) are given back.
func (s *shardSession) close() {
	s.mu.Lock()
	s.closed = true
	ids := make([]int64, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	var callSems []*semaphore
	for id, sem := range s.heldCalls {
		callSems = append(callSems, sem)
		delete(s.heldCalls, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.release(id)
	}
	for _, sem := range callSems {
		if sem != nil {
			sem.release()
		}
	}
}

// hello checks the worker's hello (its protocol and MST version, its
// plugins, then c.CheckHello) and accepts the worker with the tokens
// message. A worker refused gets cancel, and the session ends; a second
// hello is refused and the first one stands.
func (s *shardSession) hello(m *protocol.Hello) error {
	if s.res.Hello != nil {
		s.logger.Warn("refused a second hello from the worker; the first one stands", "shard", s.shard)
		return nil
	}
	if m.Protocol != protocol.Protocol || m.MSTVersion != s.c.MSTVersion {
		s.enc.Write(&protocol.Cancel{Reason: ReasonVersionMismatch})
		return fmt.Errorf("shard %d: the worker runs %s with MST %s, the coordinator %s with MST %s: install the same MST on the worker machine",
			s.shard, m.Protocol, m.MSTVersion, protocol.Protocol, s.c.MSTVersion)
	}
	s.res.Hello = m
	// (Without the shard's bundle there is nothing to compare the
	// worker's plugins with.)
	if err := checkPlugins(s.bundle, m.Plugins); err != nil {
		s.enc.Write(&protocol.Cancel{Reason: ReasonVersionMismatch})
		return fmt.Errorf("shard %d: the worker does not run the coordinator's plugins (%s): install the same plugins, at the same versions, on the worker machine, or use the same mst build there; no trial ran", s.shard, err)
	}
	if s.c.CheckHello != nil {
		if err := s.c.CheckHello(s.bundle, m); err != nil {
			s.enc.Write(&protocol.Cancel{Reason: ReasonRefused})
			return fmt.Errorf("shard %d: the worker's machine (%s/%s) cannot run this shard, no trial ran:\n%w", s.shard, m.OS, m.Arch, err)
		}
	}
	values := map[string]string{}
	if s.c.Secrets != nil {
		values = s.c.Secrets.Env()
	}
	if err := s.enc.Write(&protocol.Tokens{Values: values}); err != nil {
		return fmt.Errorf("shard %d: %w: sending tokens: %v", s.shard, ErrWorkerLost, err)
	}
	return nil
}

// acquire takes a worker's ask for room for a trial: it refuses one that
// is not the shard's to run, answers at once one that c.Gate skips, and
// waits for the room of the others beside the read loop (waitForRoom).
func (s *shardSession) acquire(m *protocol.Acquire) error {
	if s.res.Hello == nil {
		return fmt.Errorf("shard %d: the worker sent acquire before hello", s.shard)
	}
	if why := refuseAcquire(m, s.acquired, s.trials, s.shard); why != "" {
		s.logger.Warn("refused an acquire: "+why, "shard", s.shard, "trial", clip(m.Key.String()), "acquire", m.ID)
		if _, dup := s.acquired[m.ID]; !dup && m.ID > 0 {
			// Answered, so the worker does not wait for it; the trial it
			// reports for it is refused in turn.
			s.enc.Write(&protocol.Granted{ID: m.ID, Skip: "refused by the coordinator: " + why})
		}
		return nil
	}
	s.acquired[m.ID] = m.Key
	s.trials.mark(m.Key, trialTaken)
	if s.c.Gate != nil {
		if skip := s.c.Gate.Admit(m.Key); skip != "" {
			s.grantSkip(m.ID, skip)
			return nil
		}
	}
	go s.waitForRoom(m)
	return nil
}

// waitForRoom takes the room an acquire asks for under c.Limits, asks
// c.Gate about its trial once more, and answers with granted: the room is
// held until the trial is reported. It runs on a goroutine of its own;
// room found once the session closed is given back, unanswered.
func (s *shardSession) waitForRoom(m *protocol.Acquire) {
	sems, err := s.c.Limits.acquire(s.grantCtx, m.Providers, m.Servers)
	if err != nil {
		return
	}
	skip := ""
	if s.c.Gate != nil {
		skip = s.c.Gate.Admit(m.Key)
	}
	s.mu.Lock()
	if ended := s.closed; ended || skip != "" {
		s.mu.Unlock()
		for _, sem := range sems {
			sem.release()
		}
		if !ended {
			s.grantSkip(m.ID, skip)
		}
		return
	}
	s.held[m.ID] = sems
	s.granted[m.ID] = true
	s.mu.Unlock()
	s.enc.Write(&protocol.Granted{ID: m.ID})
}

// grantSkip answers an acquire with a granted that skips its trial,
// holding no room.
func (s *shardSession) grantSkip(id int64, skip string) {
	s.mu.Lock()
	s.granted[id] = true
	s.mu.Unlock()
	s.enc.Write(&protocol.Granted{ID: id, Skip: skip})
}

// acquireCall takes a worker's ask for a place for one tool call: it
// refuses an ID used before and a server the shard's variants do not use,
// and waits for the place of the others beside the read loop
// (waitForCall).
func (s *shardSession) acquireCall(m *protocol.AcquireCall) error {
	if s.res.Hello == nil {
		return fmt.Errorf("shard %d: the worker sent acquire-call before hello", s.shard)
	}
	if _, seen := s.calls[m.ID]; seen || m.ID <= 0 {
		s.logger.Warn("refused a call acquire: its id is not a positive number or was used before in this shard; it is not answered", "shard", s.shard, "call", m.ID, "server", clip(m.Server))
		return nil
	}
	if s.used != nil && !s.used[m.Server] {
		s.calls[m.ID] = callRefused
		why := fmt.Sprintf("shard %d's variants do not use server %q", s.shard, clip(m.Server))
		s.logger.Warn("refused a call acquire: "+why, "shard", s.shard, "call", m.ID)
		// Answered, so the worker does not wait for it.
		s.enc.Write(&protocol.CallGranted{ID: m.ID, Refused: "refused by the coordinator: " + why})
		return nil
	}
	s.calls[m.ID] = callWaiting
	go s.waitForCall(m)
	return nil
}

// waitForCall takes a place for one tool call under c.Limits and answers
// with call-granted: the place is held until the worker releases the
// call. It runs on a goroutine of its own; a place found once the session
// closed is given back, unanswered.
func (s *shardSession) waitForCall(m *protocol.AcquireCall) {
	sem, err := s.c.Limits.acquireCall(s.grantCtx, m.Server)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if sem != nil {
			sem.release()
		}
		return
	}
	s.heldCalls[m.ID] = sem
	s.mu.Unlock()
	s.enc.Write(&protocol.CallGranted{ID: m.ID})
}

// releaseCall gives back the place of a granted tool call; a release of
// a call that holds none is refused.
func (s *shardSession) releaseCall(m *protocol.ReleaseCall) error {
	s.mu.Lock()
	sem, ok := s.heldCalls[m.ID]
	delete(s.heldCalls, m.ID)
	s.mu.Unlock()
	if !ok {
		s.logger.Warn("refused a call release: "+refuseRelease(s.calls, m.ID)+"; no place is given back", "shard", s.shard, "call", m.ID)
		return nil
	}
	s.calls[m.ID] = callReleased
	if sem != nil {
		sem.release()
	}
	return nil
}

// needTokens answers a worker's ask for fresh tokens through
// c.TokenSource, from a goroutine of its own: a token source may take a
// while (a refresh over the network), and the worker does not wait for
// the answer.
func (s *shardSession) needTokens(m *protocol.NeedTokens) error {
	go s.c.answerNeedTokens(s.tokenCtx, s.shard, s.enc, m)
	return nil
}

// trial takes a collect shard's report of a finished trial: it gives the
// trial's room back, and passes the trial on to c.Events once its
// transcript is copied back. A report the coordinator did not grant, or
// one from a grade shard, is refused: the trial stays missing.
func (s *shardSession) trial(m *protocol.Trial) error {
	why := s.refuseReport(m)
	if s.grading {
		why = fmt.Sprintf("shard %d grades; it runs no trial", s.shard)
	}
	if why != "" {
		// Nothing is fetched or stored: the trial stays missing, and a
		// resume runs it again.
		s.logger.Warn("refused a trial report: "+why, "shard", s.shard, "trial", clip(m.Key.String()), "acquire", m.Acquire)
		return nil
	}
	s.accept(m.Acquire, m.Key)
	if r, ok := s.c.Events.(Reporter); ok {
		r.Reported(s.shard, m)
	}
	s.release(m.Acquire)
	if m.Path == "" {
		s.logger.Warn("the worker could not store a trial's transcript; it stays missing", "shard", s.shard, "trial", m.Key.String())
		return nil
	}
	if !safePath(m.Path, "transcripts/") {
		// A path that may leave the worker's results (.., /, a drive, a
		// backslash) is never fetched: the worker is not trusted with the
		// coordinator's reach into its machine.
		s.logger.Warn("the worker named a transcript outside its results; the trial stays missing", "shard", s.shard, "trial", m.Key.String(), "path", m.Path)
		return nil
	}
	s.deliver(m.Path, m.Key, func(data []byte) {
		if s.c.Events != nil {
			s.c.Events.Trial(s.shard, m, data)
		}
	})
	return nil
}

// graded takes a grade shard's report of a graded trial: it gives the
// trial's room back, and passes the grade on to c.Grades once its file is
// copied back. A report the coordinator did not grant, or one from a
// collect shard, is refused: the trial stays ungraded.
func (s *shardSession) graded(m *protocol.Graded) error {
	why := s.refuseReport(&protocol.Trial{Acquire: m.Acquire, Key: m.Key})
	if s.bundle != nil && !s.grading {
		why = fmt.Sprintf("shard %d runs trials; it grades none", s.shard)
	}
	if why != "" {
		// Nothing is fetched or stored: the trial stays ungraded, and mst
		// grade --resume grades it.
		s.logger.Warn("refused a grade report: "+why, "shard", s.shard, "trial", clip(m.Key.String()), "acquire", m.Acquire)
		return nil
	}
	s.accept(m.Acquire, m.Key)
	s.release(m.Acquire)
	if m.Path == "" {
		s.logger.Warn("the worker could not grade a trial; it stays ungraded", "shard", s.shard, "trial", m.Key.String())
		return nil
	}
	if m.Path != GradePath(m.Key) || !safePath(m.Path, "grades/") {
		// Only the one name a grade of this trial has is fetched: the
		// worker is not trusted with the coordinator's reach into its
		// machine.
		s.logger.Warn("the worker named a grade file that is not its trial's; the trial stays ungraded", "shard", s.shard, "trial", m.Key.String(), "path", clip(m.Path))
		return nil
	}
	s.deliver(m.Path, m.Key, func(data []byte) {
		if s.c.Grades != nil {
			s.c.Grades.Graded(s.shard, m, data)
		}
	})
	return nil
}

// heartbeat only proves the worker is alive (the read loop's silence
// timer restarts with every message).
func (s *shardSession) heartbeat(*protocol.Heartbeat) error { return nil }

// done ends the session: with the worker's error, if it reported one.
func (s *shardSession) done(m *protocol.Done) error {
	s.res.Done = m
	if m.Error != "" {
		return fmt.Errorf("shard %d: %s", s.shard, m.Error)
	}
	return errShardDone
}

// unexpected logs a message a worker does not send, and goes on.
func (s *shardSession) unexpected(m any) error {
	s.logger.Warn("unexpected message from worker", "shard", s.shard, "type", fmt.Sprintf("%T", m))
	return nil
}

// refuseReport says why a trial or grade report is refused, or "" to
// take it (refuseTrial).
func (s *shardSession) refuseReport(m *protocol.Trial) string {
	return refuseTrial(m, s.acquired, s.wasGranted(m.Acquire), s.trials, s.shard)
}

// accept records a report taken: its trial is reported, and what was kept
// of its acquire is dropped (its room is given back by release).
func (s *shardSession) accept(acquire int64, key transcript.Key) {
	delete(s.acquired, acquire)
	s.mu.Lock()
	delete(s.granted, acquire)
	s.mu.Unlock()
	s.trials.mark(key, trialReported)
}

// wasGranted reports whether an acquire was answered with granted (and
// its trial not reported yet).
func (s *shardSession) wasGranted(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted[id]
}

// release gives back the room an acquire holds, if any.
func (s *shardSession) release(id int64) {
	s.mu.Lock()
	sems := s.held[id]
	delete(s.held, id)
	s.mu.Unlock()
	for _, sem := range sems {
		sem.release()
	}
}

// deliver calls report with the bytes of the file at path once they are
// copied back (after the reports before it), or at once with nil when the
// worker writes into the run's store itself.
func (s *shardSession) deliver(path string, key transcript.Key, report func(data []byte)) {
	if s.copies == nil {
		report(nil)
		return
	}
	s.copies.add(path, key.String(), report)
}
