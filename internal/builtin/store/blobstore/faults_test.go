package blobstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// The store meets a service that stops answering: a fault proxy between
// it and the emulator refuses connections, hangs, answers 500 or 503,
// cuts answers or trickles them. Every call fails within a bound, wrapping
// store.ErrUnavailable and naming the store, reports its retries, ends at
// once when its context is cancelled, and works again once the service
// does.

// testLimits lower the store's bounds: a call fails after a second.
var testLimits = blobstore.Limits{Call: time.Second, Try: 400 * time.Millisecond, Backoff: 20 * time.Millisecond, Open: time.Second}

// failBound is how long a faulted call may take to fail: three times the
// bound of a call (Call, and Open for Open).
const failBound = 3 * time.Second

var faults = []blobtest.Fault{blobtest.Refuse, blobtest.Hang, blobtest.Status(500), blobtest.Status(503), blobtest.Cut, blobtest.Trickle}

// faultEnv is a bucket of an emulator behind a fault proxy.
type faultEnv struct {
	proxy *blobtest.FaultProxy
	name  string // the store's URL without its query: scheme://bucket/team
	open  func(ctx context.Context, o blobstore.Options) (*blobstore.Store, error)
}

// emulators starts one emulator of each kind, shared by the subtests.
type emulators struct {
	gcs *blobtest.GCS
	s3  *blobtest.S3
}

func startEmulators(t *testing.T) emulators {
	return emulators{gcs: blobtest.StartGCS(t), s3: blobtest.StartS3(t)}
}

func (e emulators) env(t *testing.T, kind string) *faultEnv {
	t.Helper()
	switch kind {
	case "gs":
		bucket := e.gcs.NewBucket(t)
		p, host := blobtest.StartFaultProxy(t, e.gcs.Host())
		u, err := blobstore.Parse("gs://" + bucket + "/team")
		if err != nil {
			t.Fatal(err)
		}
		return &faultEnv{proxy: p, name: "gs://" + bucket + "/team", open: func(ctx context.Context, o blobstore.Options) (*blobstore.Store, error) {
			return blobstore.Open(ctx, u, blobstore.WithGCSEndpoint(o, host))
		}}
	default:
		bucket := e.s3.NewBucket(t)
		p, loc := blobtest.StartFaultProxy(t, e.s3.StoreURL(bucket, "team")+"&anonymous=true")
		u, err := blobstore.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		return &faultEnv{proxy: p, name: "s3://" + bucket + "/team", open: func(ctx context.Context, o blobstore.Options) (*blobstore.Store, error) {
			return blobstore.Open(ctx, u, o)
		}}
	}
}

// retries records what a store reports.
type retries struct {
	mu     sync.Mutex
	all    []blobstore.Retry
	gaveUp chan blobstore.Retry
}

func newRetries() *retries { return &retries{gaveUp: make(chan blobstore.Retry, 100)} }

func (r *retries) on(x blobstore.Retry) {
	r.mu.Lock()
	r.all = append(r.all, x)
	r.mu.Unlock()
	if x.GaveUp() {
		select {
		case r.gaveUp <- x:
		default:
		}
	}
}

func (r *retries) list() []blobstore.Retry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]blobstore.Retry(nil), r.all...)
}

// checkReported: the store reported at least one retry, in the words a
// person sees, and that it gave up.
func (r *retries) checkReported(t *testing.T, name string) {
	t.Helper()
	var retried, gaveUp bool
	for _, x := range r.list() {
		if x.Store != name {
			t.Errorf("Retry.Store = %q, want %q", x.Store, name)
		}
		switch {
		case x.GaveUp():
			gaveUp = true
			if !strings.HasPrefix(x.String(), "store not answering ("+name+"): gave up") {
				t.Errorf("a give-up reads %q", x)
			}
		default:
			retried = true
			if want := fmt.Sprintf("store not answering (%s): retry %d in ", name, x.Try); !strings.HasPrefix(x.String(), want) {
				t.Errorf("a retry reads %q, want it to start %q", x, want)
			}
		}
	}
	if !retried || !gaveUp {
		t.Errorf("retries reported: %v; want a retry and a give-up", r.list())
	}
}

func testTranscript(k transcript.Key) *transcript.Transcript {
	return &transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Key: k, Answer: strings.Repeat("sunny ", 200),
		Outcome: transcript.Outcome{Status: transcript.Answered}}
}

// checkFailed checks err, met by a call under fault f after took.
func checkFailed(t *testing.T, f blobtest.Fault, name string, err error, took time.Duration) {
	t.Helper()
	t.Logf("%s: failed after %s: %v", f, took.Round(time.Millisecond), err)
	switch {
	case err == nil:
		t.Fatalf("under %s the call succeeded", f)
	case !errors.Is(err, store.ErrUnavailable):
		t.Errorf("under %s: %v; want it to wrap store.ErrUnavailable", f, err)
	case errors.Is(err, context.Canceled):
		t.Errorf("under %s: %v reads as a cancellation", f, err)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("under %s: %v; want it to name %s", f, err, name)
	}
	if took > failBound {
		t.Errorf("under %s the call took %s to fail, want less than %s", f, took, failBound)
	}
}

// checkMet: a fault other than Refuse was met by a request.
func checkMet(t *testing.T, f blobtest.Fault, met <-chan struct{}) {
	t.Helper()
	if f == blobtest.Refuse {
		return
	}
	select {
	case <-met:
	default:
		t.Errorf("under %s the proxy saw no request", f)
	}
}

// TestFaults plays each fault on each kind of call, on both clouds.
func TestFaults(t *testing.T) {
	t.Parallel()
	emus := startEmulators(t)
	for _, kind := range []string{"gs", "s3"} {
		for _, f := range faults {
			for _, op := range []string{"open", "write", "read", "list", "renew"} {
				t.Run(kind+"/"+f.String()+"/"+op, func(t *testing.T) {
					t.Parallel()
					e := emus.env(t, kind)
					rec := newRetries()
					opts := blobstore.Options{Eval: "weather", Limits: testLimits, OnRetry: rec.on}
					if op == "renew" {
						testRenewFault(t, e, f, opts, rec)
						return
					}
					ctx := t.Context()
					st, err := e.open(ctx, opts)
					if err != nil {
						t.Fatal(err)
					}
					r, err := st.Create(ctx, "run-1", nil)
					if err != nil {
						t.Fatal(err)
					}
					stored := transcript.Key{Case: "stored", Variant: "v", Trial: 1}
					if _, err := r.WriteTranscript(ctx, testTranscript(stored)); err != nil {
						t.Fatal(err)
					}
					calls := map[string]func(n int) error{
						"open": func(int) error { _, err := e.open(ctx, opts); return err },
						"write": func(n int) error {
							_, err := r.WriteTranscript(ctx, testTranscript(transcript.Key{Case: "new", Variant: "v", Trial: n}))
							return err
						},
						"read": func(int) error { _, err := r.ReadTranscript(ctx, stored); return err },
						"list": func(int) error { _, err := r.Keys(ctx); return err },
					}
					met := e.proxy.Set(f, nil)
					start := time.Now()
					err = calls[op](1)
					checkFailed(t, f, e.name, err, time.Since(start))
					checkMet(t, f, met)
					rec.checkReported(t, e.name)

					e.proxy.Set(blobtest.Pass, nil)
					if err := calls[op](2); err != nil {
						t.Errorf("once the store answers again: %v", err)
					}
				})
			}
		}
	}
}

// testRenewFault: a lease renewal that meets the fault is reported as
// given up within the bound, the renewals go on once the store answers,
// and the lock is let go.
func testRenewFault(t *testing.T, e *faultEnv, f blobtest.Fault, opts blobstore.Options, rec *retries) {
	ctx := t.Context()
	opts.Lease = 1500 * time.Millisecond // renewed every 500ms
	st, err := e.open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Create(ctx, "run-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	release, err := r.Lock(ctx, transcript.Owner{PID: 1, Host: "here"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	met := e.proxy.Set(f, nil)
	if f != blobtest.Refuse {
		select {
		case <-met:
			start = time.Now()
		case <-time.After(5 * time.Second):
			t.Fatalf("under %s no renewal reached the proxy in 5s (the lease is renewed every 500ms)", f)
		}
	}
	select {
	case x := <-rec.gaveUp:
		took := time.Since(start)
		t.Logf("%s: a renewal gave up after %s: %s", f, took.Round(time.Millisecond), x)
		if !strings.Contains(x.Object, "/locks/") {
			t.Errorf("the call that gave up was about %s, want the run's lock", x.Object)
		}
		if took > failBound {
			t.Errorf("under %s a renewal took %s to give up, want less than %s", f, took, failBound)
		}
	case <-time.After(failBound + time.Second):
		t.Fatalf("under %s no renewal gave up within %s; reported: %v", f, failBound+time.Second, rec.list())
	}
	// The renewals go on once the store answers, and the lock is let go.
	next := e.proxy.Set(blobtest.Pass, nil)
	<-next
	if err := release(); err != nil {
		t.Errorf("releasing once the store answers: %v", err)
	}
	if _, live, err := r.(*blobstore.Run).Holder(ctx); err != nil || live {
		t.Errorf("Holder after release = live %v, %v; want let go", live, err)
	}
}

// TestFaultReleaseBounded: letting go of a lock while the store hangs
// ends within the bound, however the renewal was doing.
func TestFaultReleaseBounded(t *testing.T) {
	t.Parallel()
	emus := startEmulators(t)
	for _, kind := range []string{"gs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := emus.env(t, kind)
			ctx := t.Context()
			st, err := e.open(ctx, blobstore.Options{Eval: "weather", Limits: testLimits, Lease: 1500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			r, err := st.Create(ctx, "run-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			release, err := r.Lock(ctx, transcript.Owner{PID: 1, Host: "here"})
			if err != nil {
				t.Fatal(err)
			}
			<-e.proxy.Set(blobtest.Hang, nil) // a renewal hangs
			start := time.Now()
			err = release()
			checkFailed(t, blobtest.Hang, e.name, err, time.Since(start))
		})
	}
}

// TestFaultCancel: cancelling the context of a call that hangs ends it at
// once, with the context's error, however long its bounds.
func TestFaultCancel(t *testing.T) {
	t.Parallel()
	emus := startEmulators(t)
	long := blobstore.Limits{Call: time.Minute, Try: time.Minute, Open: time.Minute}
	for _, kind := range []string{"gs", "s3"} {
		for _, op := range []string{"open", "write", "read", "list"} {
			t.Run(kind+"/"+op, func(t *testing.T) {
				t.Parallel()
				e := emus.env(t, kind)
				opts := blobstore.Options{Eval: "weather", Limits: long}
				st, err := e.open(t.Context(), opts)
				if err != nil {
					t.Fatal(err)
				}
				r, err := st.Create(t.Context(), "run-1", nil)
				if err != nil {
					t.Fatal(err)
				}
				stored := transcript.Key{Case: "stored", Variant: "v", Trial: 1}
				if _, err := r.WriteTranscript(t.Context(), testTranscript(stored)); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				calls := map[string]func() error{
					"open": func() error { _, err := e.open(ctx, opts); return err },
					"write": func() error {
						_, err := r.WriteTranscript(ctx, testTranscript(transcript.Key{Case: "new", Variant: "v", Trial: 1}))
						return err
					},
					"read": func() error { _, err := r.ReadTranscript(ctx, stored); return err },
					"list": func() error { _, err := r.Keys(ctx); return err },
				}
				met := e.proxy.Set(blobtest.Hang, nil)
				done := make(chan error, 1)
				go func() { done <- calls[op]() }()
				<-met
				start := time.Now()
				cancel()
				select {
				case err := <-done:
					took := time.Since(start)
					t.Logf("ended %s after the cancel: %v", took.Round(time.Millisecond), err)
					if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
						t.Errorf("a cancelled %s = %v; want context.Canceled", op, err)
					}
					if took > time.Second {
						t.Errorf("a cancelled %s took %s to end", op, took)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("a cancelled %s had not ended 10s after the cancel", op)
				}
			})
		}
	}
}

// TestRefusedAtOpen: a store whose service refuses connections is refused
// at Open within its bound, naming the URL, the address and where the
// address came from. (Not parallel: it sets STORAGE_EMULATOR_HOST.)
func TestRefusedAtOpen(t *testing.T) {
	g := blobtest.StartGCS(t)
	bucket := g.NewBucket(t)
	p, host := blobtest.StartFaultProxy(t, g.Host())
	p.Set(blobtest.Refuse, nil)
	t.Setenv("STORAGE_EMULATOR_HOST", host)
	u, err := blobstore.Parse("gs://" + bucket + "/team")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = blobstore.Open(t.Context(), u, blobstore.Options{Limits: blobstore.Limits{Backoff: 20 * time.Millisecond, Open: time.Second}})
	took := time.Since(start)
	t.Logf("refused after %s: %v", took.Round(time.Millisecond), err)
	want := "gs://" + bucket + "/team: store not answering after "
	for _, w := range []string{want, "connection refused by " + host + " (STORAGE_EMULATOR_HOST=" + host + ")"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Open = %v\nwant it to say %q", err, w)
		}
	}
	if !errors.Is(err, store.ErrUnavailable) || took > failBound {
		t.Errorf("Open took %s and returned %v; want store.ErrUnavailable within %s", took, err, failBound)
	}

}

// TestRefusedAtOpenDefault: with the default bounds, a store that refuses
// connections is refused within DefaultOpen (10 s), on both clouds.
func TestRefusedAtOpenDefault(t *testing.T) {
	t.Parallel()
	emus := startEmulators(t)
	for _, kind := range []string{"gs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := emus.env(t, kind)
			e.proxy.Set(blobtest.Refuse, nil)
			start := time.Now()
			_, err := e.open(t.Context(), blobstore.Options{})
			took := time.Since(start)
			t.Logf("refused after %s: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), e.name) || took > blobstore.DefaultOpen+time.Second {
				t.Errorf("Open with the default bounds took %s and returned %v; want store.ErrUnavailable naming %s within %s", took, err, e.name, blobstore.DefaultOpen)
			}
		})
	}
}

// TestS3EndpointNamed: an s3:// store whose endpoint refuses says the
// address came from the URL.
func TestS3EndpointNamed(t *testing.T) {
	t.Parallel()
	s := blobtest.StartS3(t)
	bucket := s.NewBucket(t)
	p, loc := blobtest.StartFaultProxy(t, s.StoreURL(bucket, "team")+"&anonymous=true")
	p.Set(blobtest.Refuse, nil)
	u, err := blobstore.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = blobstore.Open(t.Context(), u, blobstore.Options{Limits: testLimits})
	endpoint, _ := url.QueryUnescape(u.Query().Get("endpoint"))
	want := "connection refused by " + p.Addr() + " (endpoint=" + endpoint + " in the URL)"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "s3://"+bucket+"/team") {
		t.Errorf("Open = %v\nwant it to name the store and say %q", err, want)
	}
}

// TestFaultOnlyMatched: the proxy faults only the requests a test picks,
// and a retried conditional write whose first try landed is the write's
// own, not a lost race.
func TestFaultOnlyMatched(t *testing.T) {
	t.Parallel()
	emus := startEmulators(t)
	for _, kind := range []string{"gs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := emus.env(t, kind)
			ctx := t.Context()
			rec := newRetries()
			st, err := e.open(ctx, blobstore.Options{Eval: "weather", Limits: testLimits, OnRetry: rec.on})
			if err != nil {
				t.Fatal(err)
			}
			r, err := st.Create(ctx, "run-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			// The first answer to a write is cut: the object is stored,
			// the writer does not know it, and tries again.
			var once sync.Once
			first := func(req *http.Request) bool {
				hit := false
				if req.Method == http.MethodPut || req.Method == http.MethodPost {
					once.Do(func() { hit = true })
				}
				return hit
			}
			met := e.proxy.Set(blobtest.Cut, first)
			k := transcript.Key{Case: "a", Variant: "v", Trial: 1}
			if _, err := r.WriteTranscript(ctx, testTranscript(k)); err != nil {
				t.Errorf("WriteTranscript whose first answer was cut = %v, want it stored", err)
			}
			checkMet(t, blobtest.Cut, met)
			if len(rec.list()) == 0 {
				t.Errorf("no retry reported")
			}
			if got, err := r.ReadTranscript(ctx, k); err != nil || got.Key != k {
				t.Errorf("ReadTranscript = %v, %v", got, err)
			}
		})
	}
}
