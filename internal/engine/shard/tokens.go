package shard

// Tokens on both sides of the protocol.
//
// The coordinator sends a tokens message right after hello with the run's
// secrets, and answers each need-tokens message through its TokenSource.
// Every value it hands out joins its secrets Set first, so the run's
// redaction covers a value before any worker has it.
//
// The worker keeps every value it is handed in its secrets Set (memory,
// and redaction of what it writes) and writes each one to a file named
// after it in a memory-backed folder, for clients that read tokens from
// files. Sessions get the folder's path in their Env as MST_TOKENS_DIR.
// For a value that expires, the worker sends need-tokens before it does
// (see refreshAfter); a value that expires before a fresh one arrives is
// dropped: its file is removed and it is left out of the Env of sessions
// set up after that. Trials go on either way; the client decides what a
// missing token means. The folder is removed when Run returns.
//
// The Env a variant's sessions get is fixed when its first trial with a
// given setting starts, so a value that changes later reaches running
// sessions only through its file: a client that outlives its tokens reads
// them from MST_TOKENS_DIR each time it needs one.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
)

// TokensDirEnv is the name, in a session's Env, of the folder that holds
// the worker's tokens as files: one file per token, named after the token,
// holding its current value and nothing else, beside one file that is
// not a token: .mst-owner, which names the worker (no token has a name
// that starts with a dot). A file is replaced (never rewritten in place)
// when a fresh value arrives and removed when its value expires. The
// variable is absent when the worker has no such folder.
const TokensDirEnv = "MST_TOKENS_DIR"

// Token is an access token a TokenSource hands out.
type Token struct {
	Value string
	// Expires is when Value stops working; the zero time means never.
	Expires time.Time
	// Refused, when set, says why there is no Value for this name (the
	// text reaches the worker, and its trials' errors, as it is: it must
	// hold no secret).
	Refused string
}

// TokenSource gives a Coordinator the access tokens workers ask for. The
// refresh grants behind them stay with the source: only the tokens reach a
// worker.
//
// Tokens is called once for each need-tokens message, from a goroutine of
// its own, so calls may overlap. It returns fresh tokens by name for what
// the worker asked for: the tokens named in req.Names and those of the
// servers in req.Servers. A name it cannot serve is left out; an error
// means it serves none. A worker asks again well before a token expires
// (at 80% of its lifetime, or a minute before it expires when that is
// earlier), so a source refreshes a token that is close to expiring
// instead of returning it again. ctx ends when the run is interrupted or
// the shard ends.
type TokenSource interface {
	Tokens(ctx context.Context, req protocol.NeedTokens) (map[string]Token, error)
}

// answerNeedTokens asks the token source for what m asks for and sends
// the tokens it returns to the worker. Every value joins c.Secrets before
// it is sent; a value the Set refuses is not sent.
func (c *Coordinator) answerNeedTokens(ctx context.Context, shard int, enc *protocol.Encoder, m *protocol.NeedTokens) {
	// refuse tells the worker why none of the names it asked for come.
	refuse := func(why string) {
		if len(m.Names) == 0 {
			return
		}
		reply := &protocol.Tokens{Values: map[string]string{}, Errors: map[string]string{}}
		for _, n := range m.Names {
			reply.Errors[n] = why
		}
		if err := enc.Write(reply); err != nil {
			c.logger().Warn("sending tokens to a worker failed", "shard", shard, "err", err)
		}
	}
	if c.TokenSource == nil {
		c.logger().Warn("a worker asked for tokens, and this run has no token source", "shard", shard, "names", m.Names, "servers", m.Servers)
		refuse("this run's coordinator has no credential store to get access tokens from")
		return
	}
	got, err := c.TokenSource.Tokens(ctx, *m)
	if err != nil {
		c.logger().Warn("getting tokens for a worker failed", "shard", shard, "names", m.Names, "servers", m.Servers, "err", err)
		refuse("the coordinator could not get it: " + err.Error())
		return
	}
	reply := &protocol.Tokens{Values: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		tok := got[name]
		if tok.Refused != "" {
			if reply.Errors == nil {
				reply.Errors = map[string]string{}
			}
			reply.Errors[name] = tok.Refused
			continue
		}
		if err := c.Secrets.Add(name, tok.Value); err != nil {
			c.logger().Warn("not handing out a token", "shard", shard, "name", name, "err", err)
			continue
		}
		reply.Values[name] = tok.Value
		if !tok.Expires.IsZero() {
			if reply.Expires == nil {
				reply.Expires = map[string]time.Time{}
			}
			reply.Expires[name] = tok.Expires
		}
	}
	if len(reply.Values) == 0 && len(reply.Errors) == 0 {
		return
	}
	if err := enc.Write(reply); err != nil {
		c.logger().Warn("sending tokens to a worker failed", "shard", shard, "err", err)
	}
}

// refreshAfter is how long after a token arrives, with life left before it
// expires, the worker asks for a fresh one: at 80% of its life or a minute
// before it expires, whichever comes first, but not before half its life,
// so a token that lives two minutes or less is not asked for again at
// once.
func refreshAfter(life time.Duration) time.Duration {
	return max(min(life*4/5, life-time.Minute), life/2)
}

// workerTokens keeps the values a worker is handed. Its methods may be
// called from any goroutine.
type workerTokens struct {
	set    *secrets.Set
	logger *slog.Logger
	// ask sends a need-tokens message for names; rejected says the
	// server refused their current values.
	ask func(names []string, rejected bool)
	// fixed is Worker.TokensDir: the folder to make, or "" to choose one.
	fixed string

	mu sync.Mutex
	// dir is the folder, once made; made is a parent the worker made
	// for it, removed with it when empty.
	dir, made string
	// noDir is set once making a folder failed; it is not tried again.
	noDir   bool
	closed  bool
	held    map[string]*heldToken
	dropped map[string]bool
	// pending are names asked for and not answered yet; refused says why
	// the coordinator could not give a name. changed is closed (and
	// replaced) whenever any of held, dropped, pending or refused changes.
	pending map[string]bool
	refused map[string]string
	changed chan struct{}
}

// heldToken is the current value of one name, with its timers.
type heldToken struct {
	value   string
	expires time.Time
	// refresh asks for a fresh value; expiry drops this one.
	refresh, expiry *time.Timer
}

func (h *heldToken) stop() {
	if h.refresh != nil {
		h.refresh.Stop()
		h.expiry.Stop()
	}
}

func newWorkerTokens(set *secrets.Set, logger *slog.Logger, fixed string, ask func(names []string, rejected bool)) *workerTokens {
	return &workerTokens{set: set, logger: logger, ask: ask, fixed: fixed, held: map[string]*heldToken{}, dropped: map[string]bool{},
		pending: map[string]bool{}, refused: map[string]string{}, changed: make(chan struct{})}
}

// broadcastLocked wakes every bearer call that waits. k.mu is held.
func (k *workerTokens) broadcastLocked() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// expect marks names as asked for: bearer waits for their answer.
func (k *workerTokens) expect(names []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, n := range names {
		if k.held[n] == nil {
			k.pending[n] = true
		}
	}
}

// reject drops name's value when it is still value, which a server
// refused before its expiry, and asks the coordinator for another; bearer
// then waits for it. A value already replaced is left alone.
func (k *workerTokens) reject(name, value string) {
	k.mu.Lock()
	h := k.held[name]
	current := !k.closed && h != nil && h.value == value
	if current {
		h.stop()
		delete(k.held, name)
		k.pending[name] = true
		k.broadcastLocked()
	}
	k.mu.Unlock()
	if current {
		k.logger.Warn("a connector server refused its access token before its expiry; asking for another", "name", name)
		k.ask([]string{name}, true)
	}
}

// bearer returns name's current value. While name is asked for and not
// answered it waits, until the answer or ctx's end; with no value it says
// why (what the coordinator said, or that the value expired).
func (k *workerTokens) bearer(ctx context.Context, name string) (string, error) {
	for {
		k.mu.Lock()
		h, reason, pending, dropped, changed, closed := k.held[name], k.refused[name], k.pending[name], k.dropped[name], k.changed, k.closed
		k.mu.Unlock()
		switch {
		case closed:
			return "", errors.New("the worker is ending")
		case h != nil:
			return h.value, nil
		case pending:
			// Asked for (at the start, or again before it expired): the
			// answer is on its way.
		case reason != "":
			return "", errors.New(reason)
		case dropped:
			return "", errors.New("its access token expired before the coordinator sent a fresh one (see the coordinator's log)")
		default:
			return "", errors.New("the coordinator sent none")
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the coordinator to send it: %w", ctx.Err())
		}
	}
}

// receive takes the values of a tokens message. When it returns, each
// accepted value is in the Set and in its file.
func (k *workerTokens) receive(m *protocol.Tokens) {
	if len(m.Errors) > 0 {
		k.mu.Lock()
		for _, name := range slices.Sorted(maps.Keys(m.Errors)) {
			k.logger.Warn("the coordinator has no token to give", "name", name, "why", m.Errors[name])
			k.refused[name] = m.Errors[name]
			delete(k.pending, name)
		}
		k.broadcastLocked()
		k.mu.Unlock()
	}
	for _, name := range slices.Sorted(maps.Keys(m.Values)) {
		value := m.Values[name]
		// Even a value refused below is added, so it is redacted.
		if err := k.set.Add(name, value); err != nil {
			k.logger.Warn("refusing a token", "name", name, "err", err)
			continue
		}
		k.hold(name, value, m.Expires[name])
	}
}

func (k *workerTokens) hold(name, value string, expires time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	old := k.held[name]
	if old != nil && old.value == value && old.expires.Equal(expires) {
		return
	}
	now := time.Now()
	if !expires.IsZero() && !expires.After(now) {
		k.logger.Warn("ignoring a token that arrived already expired", "name", name)
		if old == nil {
			k.dropped[name] = true
		}
		delete(k.pending, name)
		k.broadcastLocked()
		return
	}
	if old != nil {
		old.stop()
	}
	// Only tokens (values that expire) get a file; the run's static
	// secrets reach clients through their environment alone.
	if !expires.IsZero() {
		if err := k.writeLocked(name, value); err != nil {
			k.logger.Warn("writing a token's file failed", "name", name, "err", err)
		}
	}
	h := &heldToken{value: value, expires: expires}
	k.held[name] = h
	delete(k.dropped, name)
	delete(k.pending, name)
	delete(k.refused, name)
	k.broadcastLocked()
	if !expires.IsZero() {
		life := expires.Sub(now)
		h.refresh = time.AfterFunc(refreshAfter(life), func() { k.refresh(name, h) })
		h.expiry = time.AfterFunc(life, func() { k.expire(name, h) })
	}
}

// refresh asks for a fresh value of name, unless h was replaced meanwhile.
func (k *workerTokens) refresh(name string, h *heldToken) {
	k.mu.Lock()
	current := !k.closed && k.held[name] == h
	if current {
		// Should the value expire before the answer, bearer waits for it.
		k.pending[name] = true
	}
	k.mu.Unlock()
	if current {
		k.logger.Debug("asking for a fresh token", "name", name, "expires", h.expires)
		k.ask([]string{name}, false)
	}
}

// expire drops name's value h, unless a fresh value replaced it.
func (k *workerTokens) expire(name string, h *heldToken) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.held[name] != h {
		return
	}
	delete(k.held, name)
	k.dropped[name] = true
	k.broadcastLocked()
	if k.dir != "" {
		if err := os.Remove(filepath.Join(k.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			k.logger.Warn("removing an expired token's file failed", "name", name, "err", err)
		}
	}
	k.logger.Warn("a token expired before a fresh one came; sessions opened from now on go without it", "name", name)
}

// env returns the Env for a session opened now: the Set's values, with
// each held token's current value, without the dropped ones, and with
// TokensDirEnv when there is a folder.
func (k *workerTokens) env() map[string]string {
	env := k.set.Env()
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, h := range k.held {
		env[name] = h.value
	}
	for name := range k.dropped {
		delete(env, name)
	}
	if k.dir != "" && !k.closed {
		env[TokensDirEnv] = k.dir
	}
	return env
}

// close stops the timers and removes the folder. Later calls do nothing.
func (k *workerTokens) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	k.broadcastLocked()
	for _, h := range k.held {
		h.stop()
	}
	if k.dir == "" {
		return nil
	}
	if err := os.RemoveAll(k.dir); err != nil {
		return fmt.Errorf("removing the tokens folder: %w", err)
	}
	if k.made != "" {
		// Only an empty parent goes; another process may be using it.
		os.Remove(k.made)
	}
	return nil
}

// writeLocked writes value to name's file, replacing it whole, so a
// client never reads half a token. It makes the folder on first use.
func (k *workerTokens) writeLocked(name, value string) error {
	if k.dir == "" {
		if k.noDir {
			return nil
		}
		dir, made, err := makeTokensDir(k.fixed)
		if err != nil {
			k.noDir = true
			return err
		}
		k.dir, k.made = dir, made
		// The folder names this worker, so that `mst runner cleanup`
		// can remove it should the worker die without doing so.
		if err := proctree.MarkOwner(dir, ""); err != nil {
			k.logger.Warn("marking the tokens folder as this worker's failed", "err", err)
		}
	}
	// Names are shell variable names (the Set checked), so they are
	// plain file names.
	return atomicfile.WriteFrom(filepath.Join(k.dir, name), strings.NewReader(value), 0o600)
}

// runTokensDir is the tokens folder on a worker machine whose /run (or
// /run/mst) is memory-backed.
const runTokensDir = "/run/mst/tokens"

// makeTokensDir makes the tokens folder, mode 0700, and returns it with a
// parent it made for it (or ""). With fixed set it makes that folder.
// Otherwise it makes the first it can, on a memory-backed file system
// only: /run/mst/tokens, then mst-tokens-<pid>-<random> in
// $XDG_RUNTIME_DIR, then in /dev/shm. Each must not exist yet, so two
// workers on one machine never share one.
func makeTokensDir(fixed string) (dir, made string, err error) {
	if fixed != "" {
		return fixed, "", mkdirPrivate(fixed)
	}
	if memoryBacked(nearestExisting(filepath.Dir(runTokensDir))) {
		parent := filepath.Dir(runTokensDir)
		if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) && os.Mkdir(parent, 0o755) == nil {
			made = parent
		}
		if err := mkdirPrivate(runTokensDir); err == nil {
			return runTokensDir, made, nil
		}
		if made != "" {
			os.Remove(made)
		}
	}
	pattern := fmt.Sprintf("mst-tokens-%d-", os.Getpid())
	for _, parent := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		if !filepath.IsAbs(parent) || !memoryBacked(parent) {
			continue
		}
		dir, err := os.MkdirTemp(parent, pattern)
		if err != nil {
			continue
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			os.Remove(dir)
			continue
		}
		return dir, "", nil
	}
	return "", "", errors.New("no memory-backed folder for token files (tried /run/mst/tokens, $XDG_RUNTIME_DIR and /dev/shm); clients get tokens only in their environment")
}

// mkdirPrivate makes dir, which must not exist, with mode 0700 whatever
// the umask.
func mkdirPrivate(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// nearestExisting returns path, or its nearest ancestor that exists.
func nearestExisting(path string) string {
	for {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		path = parent
	}
}

// memoryBacked reports whether the folder path is on a tmpfs or ramfs. It
// reads /proc/self/mountinfo, so it is false where there is none (outside
// Linux): without a way to tell, MST keeps tokens off the file system.
func memoryBacked(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	switch fsTypeAt(string(info), real) {
	case "tmpfs", "ramfs":
		return true
	}
	return false
}

// fsTypeAt returns the type of the file system path is on, from the text
// of /proc/self/mountinfo: that of the longest mount point holding path,
// the latest mount when one is mounted over another.
func fsTypeAt(mountinfo, path string) string {
	// Mount points have space, tab, newline and backslash escaped.
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	best, typ := -1, ""
	for line := range strings.Lines(mountinfo) {
		// id parent major:minor root mountpoint options [optional…] - type source super-options
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 6 || sep+1 >= len(fields) {
			continue
		}
		mp := unescape.Replace(fields[4])
		if mp != "/" && path != mp && !strings.HasPrefix(path, mp+"/") {
			continue
		}
		if len(mp) >= best {
			best, typ = len(mp), fields[sep+1]
		}
	}
	return typ
}

func (c *Coordinator) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}
