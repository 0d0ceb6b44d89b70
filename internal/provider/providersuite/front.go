package providersuite

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// front is an HTTP server the provider under test talks to, in front of the
// fake provider (providertest): it passes every request on, and reports
// the events the cases wait on (a request arrived; a request ended, and
// whether its client had closed the connection by then) and when they
// happened. It can also change the answers on the way back, as a network
// or a different server would.
type front struct {
	URL string

	hs    *httptest.Server
	proxy *httputil.ReverseProxy
	mode  frontMode

	// arrived gets a value for every request that arrives, ended one for
	// every request that ends (true when its client had gone: the server
	// saw the connection closed); neither blocks the server when full.
	arrived chan struct{}
	ended   chan bool
	// stalled gets a value when a stalled answer has been sent as far as
	// it goes.
	stalled chan struct{}

	mu    sync.Mutex
	times []timing // per request, in arrival order
}

// frontMode is what the front does to answers.
type frontMode int

const (
	// passAnswers passes the answers on unchanged.
	passAnswers frontMode = iota
	// stripRetryAfter removes the headers by which a server says when to
	// retry (the fake sends retry-after-ms: 1 with every fault), so that
	// the provider's own backoff decides.
	stripRetryAfter
	// stallAnswers sends the first half of every successful answer (as
	// truncateAnswers cuts it), then holds the request until its client
	// goes away.
	stallAnswers
	// truncateAnswers cuts every successful answer short and ends it
	// cleanly: an event stream after about half its events, any other
	// body after half its bytes. Nothing at the HTTP level is wrong; only
	// the content shows that the answer stopped early.
	truncateAnswers
)

// timing is when a request arrived and when its answer was written.
type timing struct {
	arrived, answered time.Time
}

// events is how many events the channels hold before the front drops them.
const events = 256

// newFront starts a front for the server at backend and stops it when the
// test ends.
func newFront(t *testing.T, backend string, mode frontMode) *front {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatalf("providersuite: the fake server's URL %q: %v", backend, err)
	}
	tr := &http.Transport{}
	f := &front{
		mode:    mode,
		arrived: make(chan struct{}, events),
		ended:   make(chan bool, events),
		stalled: make(chan struct{}, events),
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: tr,
		ErrorLog:  log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			// The client went away, or the fake did: nothing to tell.
			w.WriteHeader(http.StatusBadGateway)
		},
		ModifyResponse: func(res *http.Response) error {
			if f.mode == stripRetryAfter {
				res.Header.Del("Retry-After")
				res.Header.Del("Retry-After-Ms")
			}
			return nil
		},
	}
	f.hs = httptest.NewServer(f)
	f.URL = f.hs.URL
	t.Cleanup(func() {
		// A provider that never let go of a held request would make Close
		// wait for ever; the case has reported it already.
		f.hs.CloseClientConnections()
		f.hs.Close()
		tr.CloseIdleConnections()
	})
	return f
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	i := len(f.times)
	f.times = append(f.times, timing{arrived: time.Now()})
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	defer func() {
		// Also when the proxy aborts the answer (a cut-off stream).
		f.mu.Lock()
		f.times[i].answered = time.Now()
		f.mu.Unlock()
		select {
		case f.ended <- r.Context().Err() != nil:
		default:
		}
	}()
	if f.mode == truncateAnswers || f.mode == stallAnswers {
		f.truncated(w, r)
		return
	}
	f.proxy.ServeHTTP(w, r)
}

// truncated passes on the fake's answer to r cut short, and with
// stallAnswers holds it there.
func (f *front) truncated(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	f.proxy.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		body = truncate(body, strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream"))
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	w.Write(body)
	if f.mode != stallAnswers || rec.Code != http.StatusOK {
		return
	}
	http.NewResponseController(w).Flush()
	select {
	case f.stalled <- struct{}{}:
	default:
	}
	<-r.Context().Done()
}

// truncate keeps about the first half of body: of its events when sse,
// else of its bytes.
func truncate(body []byte, sse bool) []byte {
	if !sse {
		return body[:len(body)/2]
	}
	evs := bytes.SplitAfter(body, []byte("\n\n"))
	if len(evs) > 0 && len(bytes.TrimSpace(evs[len(evs)-1])) == 0 {
		evs = evs[:len(evs)-1]
	}
	return bytes.Join(evs[:max(len(evs)/2, 1)], nil)
}

// timings returns when each request arrived and was answered.
func (f *front) timings() []timing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]timing(nil), f.times...)
}

// resetServer starts a server that reads each request and then resets its
// connection without a word, and stops it when the test ends. It returns
// the server's base address and a count of the requests it read.
func resetServer(t *testing.T) (string, func() int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("providersuite: listening: %v", err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				n.Add(1)
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0) // Close sends a reset
				}
			})
		}
	})
	return "http://" + l.Addr().String(), n.Load
}
