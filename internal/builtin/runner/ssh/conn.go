package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Timing of connections.
const (
	// dialTimeout bounds connecting and logging in.
	dialTimeout = 30 * time.Second
	// keepaliveEvery is how often an idle connection is checked, and
	// keepaliveTimeout how long an answer may take before the connection
	// counts as dropped.
	keepaliveEvery   = 15 * time.Second
	keepaliveTimeout = 45 * time.Second
	// stopStep is how long a command being stopped gets at each step
	// (stdin closed, SIGTERM, SIGKILL, session closed) before the next.
	stopStep = 3 * time.Second
)

// sshRemote is a host reached over one SSH connection, made when first
// needed and made again after it drops. Its methods may be called from
// several goroutines at once.
type sshRemote struct {
	t     target
	creds *credentials

	mu     sync.Mutex
	client *ssh.Client
	closed bool
}

func newSSHRemote(t target, creds *credentials) *sshRemote {
	return &sshRemote{t: t, creds: creds}
}

func (s *sshRemote) name() string { return s.t.String() }

// get returns the live connection, logging in again when there is none.
func (s *sshRemote) get(ctx context.Context) (*ssh.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("the connection to %s is closed", s.t)
	}
	if s.client != nil {
		return s.client, nil
	}
	c, err := dial(ctx, s.t, s.creds)
	if err != nil {
		return nil, err
	}
	s.client = c
	go func() {
		// Once the connection ends, the next use logs in again.
		c.Wait()
		s.mu.Lock()
		if s.client == c {
			s.client = nil
		}
		s.mu.Unlock()
	}()
	return c, nil
}

// session opens a session. A connection that turns out to be dead (it
// dropped, and the goroutine that notices has not yet) is replaced once.
func (s *sshRemote) session(ctx context.Context) (*ssh.Session, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.get(ctx)
		if err != nil {
			return nil, err
		}
		sess, err := newSession(ctx, c)
		if err == nil {
			return sess, nil
		}
		c.Close()
		s.mu.Lock()
		if s.client == c {
			s.client = nil
		}
		s.mu.Unlock()
		if attempt > 0 {
			return nil, fmt.Errorf("opening a session on %s: %w", s.t, err)
		}
	}
}

// sessionTimeout bounds the wait for a session's channel to open: on a
// connection that died without closing (a peer gone silent), the request
// is never answered, and the connection is given up instead.
const sessionTimeout = 30 * time.Second

// newSession opens a session on c, or gives up on c once ctx ends or the
// server has not answered within sessionTimeout (closing c, which ends
// the wait).
func newSession(ctx context.Context, c *ssh.Client) (*ssh.Session, error) {
	type result struct {
		s   *ssh.Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := c.NewSession()
		done <- result{s, err}
	}()
	timer := time.NewTimer(sessionTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
	case <-timer.C:
	}
	c.Close()
	if r := <-done; r.err == nil {
		r.s.Close()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("the server did not open a session within %s", sessionTimeout)
}

// close ends the connection; the remote cannot be used after it.
func (s *sshRemote) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.client != nil {
		c := s.client
		s.client = nil
		return ignoreClosed(c.Close())
	}
	return nil
}

// dial connects to t and logs in, trying again twice when the network or
// a busy server (sshd's MaxStartups) fails the attempt, but not when the
// host key or the login is refused.
func dial(ctx context.Context, t target, creds *credentials) (*ssh.Client, error) {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		var c *ssh.Client
		var final bool
		if c, final, err = dialOnce(ctx, t, creds); err == nil || final {
			return c, err
		}
	}
	return nil, err
}

// dialOnce makes one attempt; final says that trying again cannot help.
func dialOnce(ctx context.Context, t target, creds *credentials) (*ssh.Client, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var refused error
	cfg := &ssh.ClientConfig{
		User:              t.User,
		Auth:              creds.auth,
		HostKeyCallback:   creds.hostKeys.callback(t, &refused),
		HostKeyAlgorithms: creds.hostKeys.algorithms(t),
		Timeout:           dialTimeout,
	}
	d := net.Dialer{KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", t.Addr())
	if err != nil {
		return nil, ctx.Err() != nil, fmt.Errorf("connecting to %s: %w", t, err)
	}
	// The handshake has no context: a deadline and a close on cancel
	// bound it.
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(conn, t.Addr(), cfg)
	stop()
	if err != nil {
		conn.Close()
		switch {
		case refused != nil:
			return nil, true, refused
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, true, fmt.Errorf("logging in to %s with %s failed: %w: check that the user is right and that its ~/.ssh/authorized_keys on the host holds the public key", t, creds.authFrom, err)
		case ctx.Err() != nil:
			return nil, true, fmt.Errorf("logging in to %s: %w", t, ctx.Err())
		}
		return nil, false, fmt.Errorf("logging in to %s: %w", t, err)
	}
	conn.SetDeadline(time.Time{})
	c := ssh.NewClient(cc, chans, reqs)
	go keepalive(c)
	return c, false, nil
}

// keepalive asks the server for a reply every keepaliveEvery and closes
// the connection when none comes within keepaliveTimeout, so a network
// that fails silently still ends the connection's sessions.
func keepalive(c *ssh.Client) {
	done := make(chan struct{})
	go func() {
		c.Wait()
		close(done)
	}()
	tick := time.NewTicker(keepaliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		reply := make(chan error, 1)
		go func() {
			// OpenSSH answers an unknown request with a failure: that
			// still proves the connection is alive.
			_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case err := <-reply:
			if err != nil {
				c.Close()
				return
			}
		case <-time.After(keepaliveTimeout):
			c.Close()
			return
		case <-done:
			return
		}
	}
}

// run runs cmdline in a session: see remote.run.
func (s *sshRemote) run(ctx context.Context, cmdline string, stdin io.Reader, stdout, stderr io.Writer) error {
	sess, err := s.session(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	sess.Stdout, sess.Stderr = orDiscard(stdout), orDiscard(stderr)
	in, err := sess.StdinPipe()
	if err != nil {
		return err
	}
	if err := sess.Start(cmdline); err != nil {
		return fmt.Errorf("starting a command on %s: %w", s.t, err)
	}
	go func() {
		if stdin != nil {
			io.Copy(in, stdin)
		}
		in.Close()
	}()
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err := <-done:
		return s.exitErr(err)
	case <-ctx.Done():
	}
	// Closing the session closes the command's stdin, stdout and stderr,
	// which ends the short commands run is used for. Exec stops a worker
	// in gentler steps first (see machine.Exec).
	sess.Close()
	select {
	case err := <-done:
		return fmt.Errorf("stopped (%w): %v", ctx.Err(), s.exitErr(err))
	case <-time.After(stopStep):
		return fmt.Errorf("stopped (%w): the command on %s did not end", ctx.Err(), s.t)
	}
}

// exitErr turns what Session.Wait returned into run's error.
func (s *sshRemote) exitErr(err error) error {
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return &exitError{host: s.t.String(), code: ee.ExitStatus(), signal: ee.Signal(), msg: ee.Msg()}
	case errors.As(err, &missing), errors.Is(err, io.EOF):
		return fmt.Errorf("the connection to %s ended before the command did: %w", s.t, errLost)
	}
	return fmt.Errorf("on %s: %w", s.t, err)
}

func (s *sshRemote) copyTo(ctx context.Context, localDir, remoteDir string) error {
	return tarTo(ctx, s, localDir, remoteDir)
}

func (s *sshRemote) copyFrom(ctx context.Context, remotePath, localPath string) error {
	return tarFrom(ctx, s, remotePath, localPath)
}

// ignoreClosed drops the error of closing what is already closed.
func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
