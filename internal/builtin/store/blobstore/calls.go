package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	"github.com/mst-eval/mst/store"
)

// Every call a store makes to its bucket (a read, a write, one page of a
// listing, an attribute read, a delete) runs under a deadline taken from
// the caller's context, and each try of it under a shorter one, so that
// one answer that never comes leaves time to ask again. A try that fails
// in a way that may pass (a connection refused, reset or cut, no answer in
// time, 5xx, 429, 408, S3's ConditionalRequestConflict) is tried again
// after a wait that doubles each time, while the call's deadline allows;
// each retry is reported (Options.OnRetry, Options.Logger). A call that
// runs out fails wrapping store.ErrUnavailable; one whose context ends
// fails at once with the context's error. The cloud SDKs' own retry loops
// are turned off (see openBucket), so this loop is the only one and every
// retry is seen.

// Limits bound the calls a store makes to its bucket. A zero field takes
// its default; tests lower them.
type Limits struct {
	// Call bounds one call with its retries (DefaultCall). A call that
	// moves data gets PerMiB more for each MiB it moves.
	Call time.Duration
	// Try bounds each try within a call (DefaultTry).
	Try time.Duration
	// Backoff is the wait before the first retry (DefaultBackoff); each
	// next wait is twice the last, up to eight times Backoff, give or
	// take a fifth.
	Backoff time.Duration
	// Open bounds Open: finding the credentials, making the client and
	// checking that the bucket answers, retries included (DefaultOpen).
	Open time.Duration
	// PerMiB is the time a call, and each of its tries, gets for each
	// MiB it sends or reads on top of Call and Try (DefaultPerMiB): a
	// read learns its size when the answer starts.
	PerMiB time.Duration
}

// The default Limits: a small object's call fails after 30 s without an
// answer, each try after 10 s; a 50 MiB transcript gets 50 s more.
const (
	DefaultCall    = 30 * time.Second
	DefaultTry     = 10 * time.Second
	DefaultBackoff = time.Second
	DefaultOpen    = 10 * time.Second
	DefaultPerMiB  = time.Second
)

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.Call, DefaultCall)
	def(&l.Try, DefaultTry)
	def(&l.Backoff, DefaultBackoff)
	def(&l.Open, DefaultOpen)
	def(&l.PerMiB, DefaultPerMiB)
	l.Try = min(l.Try, l.Call)
	return l
}

// within is l for calls that must end within d (a lease renewal).
func (l Limits) within(d time.Duration) Limits {
	l.Call = min(l.Call, d)
	l.Try = min(l.Try, d)
	return l
}

// Retry reports a try of a call to the bucket that failed in a way that
// may pass. The store tries again after Wait, or, when Wait is 0, gives up
// and the call fails wrapping store.ErrUnavailable.
type Retry struct {
	// Store is the store's URL without its query: scheme://bucket/prefix.
	Store string
	// Object is the URL of the object (or prefix) the call was about.
	Object string
	// Doing is what the call was doing: "writing", "reading", "listing",
	// "reaching the bucket", "renewing the run's lock", …
	Doing string
	// Try is the try that failed, from 1.
	Try int
	// Wait is how long until the next try; 0 when the store gives up.
	Wait time.Duration
	// Elapsed is the time since the call began.
	Elapsed time.Duration
	// Cause says, in words, what the try met; Err is the error itself.
	Cause string
	Err   error
}

// GaveUp says the call failed: there is no next try.
func (r Retry) GaveUp() bool { return r.Wait == 0 }

// String is the line a person sees:
//
//	store not answering (gs://b/p): retry 3 in 4s: connection refused by 10.0.0.1:443
func (r Retry) String() string {
	if r.GaveUp() {
		return fmt.Sprintf("store not answering (%s): gave up %s after %s in %s: %s", r.Store, r.Doing, tries(r.Try), roundDuration(r.Elapsed), r.Cause)
	}
	return fmt.Sprintf("store not answering (%s): retry %d in %s: %s", r.Store, r.Try, roundDuration(r.Wait), r.Cause)
}

func tries(n int) string {
	if n == 1 {
		return "1 try"
	}
	return fmt.Sprintf("%d tries", n)
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// unavailableError is a call that ran out of time or of tries.
type unavailableError struct {
	tries int
	took  time.Duration
	cause string
	err   error // the last try's error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("%v after %s in %s: %s", store.ErrUnavailable, tries(e.tries), roundDuration(e.took), e.cause)
}

func (e *unavailableError) Unwrap() []error { return []error{store.ErrUnavailable, e.err} }

// noAnswer is a try that got no whole answer in time. It keeps the SDK's
// error out of its chain: that error says the context was cancelled,
// which callers take for their own cancellation.
type noAnswer struct {
	host  string
	after time.Duration
}

func (e *noAnswer) Error() string {
	return fmt.Sprintf("no answer from %s within %s", e.host, roundDuration(e.after))
}

// The causes a call's and a try's deadlines cancel with.
var (
	errCallTime = errors.New("the call's time ran out")
	errTryTime  = errors.New("the try's time ran out")
)

// budget is a deadline that can be moved later: a read learns how much
// it moves only once its answer starts.
type budget struct {
	mu  sync.Mutex
	end time.Time
	t   *time.Timer
}

// startBudget returns a context cancelled with cause d from now (or when
// parent ends), its budget, and the function that releases both.
func startBudget(parent context.Context, d time.Duration, cause error) (context.Context, *budget, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	b := &budget{end: time.Now().Add(d)}
	b.t = time.AfterFunc(d, func() { cancel(cause) })
	return ctx, b, func() {
		b.t.Stop()
		cancel(nil)
	}
}

// extend moves the deadline d later, unless it has passed.
func (b *budget) extend(d time.Duration) {
	if d <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.t.Stop() {
		b.end = b.end.Add(d)
		b.t.Reset(time.Until(b.end))
	}
}

func (b *budget) left() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Until(b.end)
}

// call describes one call to the bucket.
type call struct {
	doing string
	key   string // the object or prefix; "" for the bucket itself
	size  int64  // the bytes it sends, when known before it starts
	// limits, when not nil, replace the store's (a lease renewal, Open).
	limits *Limits
}

// do runs fn under the call's deadline, trying again while it fails in a
// way that may pass. fn calls grow with the size of what it reads once
// it knows it.
func (s *Store) do(ctx context.Context, c call, fn func(ctx context.Context, grow func(n int64)) error) error {
	lim := s.limits
	if c.limits != nil {
		lim = *c.limits
	}
	start := time.Now()
	extra := perBytes(c.size, lim.PerMiB)
	cctx, cb, stopCall := startBudget(ctx, lim.Call+extra, errCallTime)
	defer stopCall()
	var last error // the last try's failure
	for try := 1; ; try++ {
		limit := min(lim.Try+extra, cb.left())
		tctx, tb, stopTry := startBudget(cctx, limit, errTryTime)
		err := fn(tctx, func(n int64) {
			d := perBytes(n, lim.PerMiB)
			cb.extend(d)
			tb.extend(d)
			limit += d
		})
		cause := context.Cause(tctx)
		stopTry()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		switch {
		case errors.Is(cause, errCallTime) && last != nil:
			// The call's time ran out in a try it cut short: what the
			// tries before met says more.
			err = last
		case errors.Is(cause, errCallTime), errors.Is(cause, errTryTime):
			err = &noAnswer{host: hostOf(err, s.host), after: limit}
		case !transient(err):
			return err
		}
		last = err
		// A retry needs time for a quarter of a try after its wait.
		wait := s.backoff(lim.Backoff, try)
		if errors.Is(cause, errCallTime) || cb.left()-wait < lim.Try/4 {
			took := time.Since(start)
			s.report(c, try, 0, took, err)
			return &unavailableError{tries: try, took: took, cause: s.cause(err), err: err}
		}
		s.report(c, try, wait, time.Since(start), err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// perBytes is the time n bytes get at perMiB a MiB.
func perBytes(n int64, perMiB time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / (1 << 20) * float64(perMiB))
}

// backoff is the wait after the try-th failure.
func (s *Store) backoff(base time.Duration, try int) time.Duration {
	b := base << min(try-1, 3)
	return b*4/5 + rand.N(b*2/5+1)
}

func (s *Store) report(c call, try int, wait, took time.Duration, err error) {
	if s.onRetry == nil && s.logger == nil {
		return
	}
	r := Retry{Store: s.name, Object: s.urlOf(c.key), Doing: c.doing, Try: try, Wait: wait, Elapsed: took, Cause: s.cause(err), Err: err}
	if s.onRetry != nil {
		s.onRetry(r)
	}
	if s.logger != nil {
		s.logger.Warn(r.String())
	}
}

// transient says a try's failure may pass if the call is tried again.
func transient(err error) bool {
	var na *noAnswer
	if errors.As(err, &na) || conflict(err) {
		return true
	}
	// (An answer of 2xx whose body was cut is judged by the cut, below.)
	if st := httpStatus(err); st >= 300 {
		return st == http.StatusRequestTimeout || st == http.StatusTooManyRequests || st >= 500
	}
	if code(err) == gcerrors.ResourceExhausted {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return !dns.IsNotFound
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, io.ErrUnexpectedEOF, io.EOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// Some clients flatten the error to its text.
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "unexpected EOF",
		"transport connection broken", "malformed HTTP", "server closed idle connection", "GOAWAY", "i/o timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// httpStatus is the status of the HTTP answer err is about, or 0.
func httpStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
}

// hostOf is the address err met, or fallback.
func hostOf(err error, fallback string) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return u.Host
		}
	}
	return fallback
}

// cause says, in words, what a try met.
func (s *Store) cause(err error) string {
	var na *noAnswer
	if errors.As(err, &na) {
		return na.Error() + s.via
	}
	host := hostOf(err, s.host)
	if st := httpStatus(err); st >= 300 && st != http.StatusRequestTimeout && st != http.StatusTooManyRequests && st < 500 {
		return err.Error()
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused by " + host + s.via
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by " + host + s.via
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		strings.Contains(err.Error(), "transport connection broken"), strings.Contains(err.Error(), "malformed HTTP"):
		return "the connection to " + host + " was cut before the whole answer came" + s.via
	}
	if st := httpStatus(err); st >= 300 {
		what := fmt.Sprintf("%s answered %d %s", host, st, http.StatusText(st))
		var ae smithy.APIError
		var ge *googleapi.Error
		switch {
		case errors.As(err, &ae) && ae.ErrorCode() != "":
			what += " (" + ae.ErrorCode() + ")"
		case errors.As(err, &ge) && ge.Message != "" && len(ge.Message) < 200:
			what += " (" + ge.Message + ")"
		}
		return what
	}
	return err.Error()
}

// The store's calls. Each fails with the SDK's error (gcerrors.Code reads
// it), an error wrapping store.ErrUnavailable, or the context's error.

// get reads key whole, or its first limit+1 bytes when limit >= 0.
func (s *Store) get(ctx context.Context, key string, limit int64) ([]byte, error) {
	var out []byte
	err := s.do(ctx, call{doing: "reading", key: key}, func(ctx context.Context, grow func(int64)) error {
		rd, err := s.bucket.NewReader(ctx, key, nil)
		if err != nil {
			return err
		}
		defer rd.Close()
		grow(rd.Size())
		var r io.Reader = rd
		if limit >= 0 {
			r = io.LimitReader(rd, limit+1)
		}
		out, err = io.ReadAll(r)
		return err
	})
	return out, err
}

// getRange reads at most n bytes of key from offset off.
func (s *Store) getRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	var out []byte
	err := s.do(ctx, call{doing: "reading", key: key, size: n}, func(ctx context.Context, _ func(int64)) error {
		rd, err := s.bucket.NewRangeReader(ctx, key, off, n, nil)
		if err != nil {
			return err
		}
		defer rd.Close()
		// Exactly the bytes asked for, not to the end: the AWS SDK checks
		// a checksum at the end, which some services (gofakes3) give for
		// the whole object.
		out = make([]byte, max(min(n, rd.Size()-off), 0))
		_, err = io.ReadFull(rd, out)
		return err
	})
	return out, err
}

// put writes data to key. A write on the condition that key is not there
// that was tried more than once and then found key there reads it back:
// an earlier try may have written it before its answer was lost, and an
// object holding what was written is this write's.
func (s *Store) put(ctx context.Context, doing, key string, data []byte, opts *blob.WriterOptions, limits *Limits) error {
	n := 0
	err := s.do(ctx, call{doing: doing, key: key, size: int64(len(data)), limits: limits}, func(ctx context.Context, _ func(int64)) error {
		n++
		return s.bucket.WriteAll(ctx, key, data, opts)
	})
	if n > 1 && opts != nil && opts.IfNotExist && lost(err) {
		got, gerr := s.get(ctx, key, int64(len(data)))
		switch {
		case gerr == nil && bytes.Equal(got, data):
			return nil
		case gerr != nil && code(gerr) != gcerrors.NotFound:
			// Whose it is cannot be told: the write's fate is unknown,
			// as if it had not been answered.
			return fmt.Errorf("an earlier try may have stored it, and reading it back failed: %w", gerr)
		}
	}
	return err
}

// exists says whether key is there, reading a refusal as an error (see
// code), never as an absence.
func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	err := s.do(ctx, call{doing: "reading the attributes of", key: key}, func(ctx context.Context, _ func(int64)) error {
		_, err := s.bucket.Attributes(ctx, key)
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case code(err) == gcerrors.NotFound:
		return false, nil
	}
	return false, err
}

func (s *Store) remove(ctx context.Context, key string) error {
	return s.do(ctx, call{doing: "deleting", key: key}, func(ctx context.Context, _ func(int64)) error {
		return s.bucket.Delete(ctx, key)
	})
}

// listPageSize is the most objects one page of a listing asks for: the
// most either service returns.
const listPageSize = 1000

// list calls fn for each object or "directory" opts lists, a page at a
// time, each page a call; fn's error ends the listing and is returned.
func (s *Store) list(ctx context.Context, opts *blob.ListOptions, limits *Limits, fn func(*blob.ListObject) error) error {
	token := blob.FirstPageToken
	for {
		var page []*blob.ListObject
		var next []byte
		err := s.do(ctx, call{doing: "listing", key: opts.Prefix, limits: limits}, func(ctx context.Context, _ func(int64)) error {
			var err error
			page, next, err = s.bucket.ListPage(ctx, token, listPageSize, opts)
			return err
		})
		if err != nil {
			return err
		}
		for _, o := range page {
			if err := fn(o); err != nil {
				return err
			}
		}
		if len(next) == 0 {
			return nil
		}
		token = next
	}
}

// any says whether any object's name starts with prefix.
func (s *Store) any(ctx context.Context, prefix string) (bool, error) {
	var page []*blob.ListObject
	err := s.do(ctx, call{doing: "listing", key: prefix}, func(ctx context.Context, _ func(int64)) error {
		var err error
		page, _, err = s.bucket.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: prefix})
		return err
	})
	return len(page) > 0, err
}

// ReadObject reads the object key of the store's bucket under the store's
// deadlines and retries: whole, or its first limit+1 bytes when limit >= 0
// (so a caller can tell an object over its limit). An object that is not
// there fails with gcerrors.NotFound.
func (s *Store) ReadObject(ctx context.Context, key string, limit int64) ([]byte, error) {
	return s.get(ctx, key, limit)
}

// WriteObject writes the object key of the store's bucket under the
// store's deadlines and retries.
func (s *Store) WriteObject(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	return s.put(ctx, "writing", key, data, opts, nil)
}

// ObjectExists says whether the object key is in the store's bucket.
func (s *Store) ObjectExists(ctx context.Context, key string) (bool, error) {
	return s.exists(ctx, key)
}

// ListObjects calls fn for what opts lists in the store's bucket, a page
// at a time under the store's deadlines and retries.
func (s *Store) ListObjects(ctx context.Context, opts *blob.ListOptions, fn func(*blob.ListObject) error) error {
	return s.list(ctx, opts, nil, fn)
}

// DeleteObject removes the object key of the store's bucket under the
// store's deadlines and retries. An object that is not there fails with
// gcerrors.NotFound.
func (s *Store) DeleteObject(ctx context.Context, key string) error {
	return s.remove(ctx, key)
}

// Prefix is the key prefix of the store in its bucket: its URL's path,
// with a trailing slash, or "" for the whole bucket.
func (s *Store) Prefix() string { return s.prefix }

// NotFound says err is a call's failure on an object that is not there.
func NotFound(err error) bool { return code(err) == gcerrors.NotFound }

type optionsKey struct{}

// WithOptions returns a ctx from which OptionsFrom returns o: the options
// of the stores that code opens for the caller (a credential store kept
// in a bucket), such as where retries are reported.
func WithOptions(ctx context.Context, o Options) context.Context {
	return context.WithValue(ctx, optionsKey{}, o)
}

// OptionsFrom returns the options WithOptions put in ctx, or the zero
// Options.
func OptionsFrom(ctx context.Context) Options {
	o, _ := ctx.Value(optionsKey{}).(Options)
	return o
}

// AlreadyThere says err is a write's failure on the condition that its
// object not be there (blob.WriterOptions.IfNotExist): it was.
func AlreadyThere(err error) bool { return lost(err) }
