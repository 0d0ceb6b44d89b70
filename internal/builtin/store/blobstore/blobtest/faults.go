package blobtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what a FaultProxy does to the requests it gets.
type Fault struct {
	kind   string
	status int
}

// The faults a FaultProxy plays.
var (
	// Pass forwards every request to the emulator.
	Pass = Fault{kind: "pass"}
	// Refuse closes the proxy's port, and the connections open to it:
	// a client's connections are refused, as by a host where nothing
	// listens.
	Refuse = Fault{kind: "refuse"}
	// Hang reads each request and never answers it, holding the
	// connection open until the fault changes.
	Hang = Fault{kind: "hang"}
	// Cut forwards each request and sends back half of the answer (half
	// of its body, or of its head when it has none), then closes the
	// connection.
	Cut = Fault{kind: "cut"}
	// Trickle forwards each request and sends back the answer, head and
	// body, one byte every FaultProxy.TrickleEvery.
	Trickle = Fault{kind: "trickle"}
)

// Status answers each request with the HTTP status code and the error
// body the service sends with it (500 InternalError, 503
// ServiceUnavailable or SlowDown, 429 …), without forwarding it.
func Status(code int) Fault { return Fault{kind: "status", status: code} }

func (f Fault) String() string {
	if f.kind == "status" {
		return fmt.Sprintf("status %d", f.status)
	}
	return f.kind
}

// FaultProxy is an HTTP proxy in front of an emulator that a test
// switches, at any moment, to a Fault and back to Pass. A test waits for
// a fault to be met on the channel Set returns, never on a sleep.
//
// Set may be called from any goroutine.
type FaultProxy struct {
	// TrickleEvery is the time between two bytes of a Trickle answer
	// (default 50ms). Set it before the first request.
	TrickleEvery time.Duration
	// before is what SetBefore set.
	before atomic.Pointer[func(*http.Request)]

	t        testing.TB
	addr     string
	upstream string // http://HOST:PORT
	client   *http.Client

	mu      sync.Mutex
	fault   Fault
	match   func(*http.Request) bool
	changed chan struct{} // closed when the fault changes
	met     chan struct{} // closed when a request first meets the fault
	metOnce *sync.Once
	seen    int // requests that met a fault
	l       net.Listener
	conns   map[net.Conn]bool
	closed  bool
}

// StartFaultProxy starts a FaultProxy in front of the emulator at target,
// in Pass, and closes it when the test ends. target and the address that
// comes back are written as for RefuseWrites: HOST:PORT (GCS, for
// STORAGE_EMULATOR_HOST), an http:// URL, or an s3:// store URL, which
// comes back with the proxy as its endpoint.
func StartFaultProxy(t testing.TB, target string) (*FaultProxy, string) {
	t.Helper()
	upstream, back := splitTarget(t, "StartFaultProxy", target)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("blobtest.StartFaultProxy: no port on 127.0.0.1: %v", err)
	}
	p := &FaultProxy{
		TrickleEvery: 50 * time.Millisecond,
		t:            t, addr: l.Addr().String(), upstream: upstream.String(),
		client: &http.Client{
			Transport: &http.Transport{Proxy: nil, DisableCompression: true},
			// Answers go back to the client as they came, redirects
			// included.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		fault: Pass, changed: make(chan struct{}), met: make(chan struct{}), metOnce: new(sync.Once),
		conns: map[net.Conn]bool{},
	}
	p.serve(l)
	t.Cleanup(p.Close)
	return p, back("http://" + p.addr)
}

// Addr is the proxy's address, HOST:PORT.
func (p *FaultProxy) Addr() string { return p.addr }

// Set switches the proxy to f, for the requests match picks (all when
// match is nil; Refuse refuses every connection whatever match says),
// and returns a channel closed when the first request meets f: the
// event a test waits on. A request under way when the fault changes ends
// as the new fault says for a hung one (its connection closed), or goes
// on. Set(Pass) returns a channel closed at the next request.
func (p *FaultProxy) Set(f Fault, match func(*http.Request) bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return make(chan struct{})
	}
	was := p.fault
	p.fault, p.match = f, match
	close(p.changed)
	p.changed = make(chan struct{})
	p.met, p.metOnce = make(chan struct{}), new(sync.Once)
	switch {
	case f == Refuse && was != Refuse:
		p.l.Close()
		p.l = nil
		for c := range p.conns {
			c.Close()
		}
	case f != Refuse && was == Refuse:
		// The same port again: a client's address for the store does
		// not change.
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			p.t.Errorf("blobtest.FaultProxy: listening on %s again: %v", p.addr, err)
			break
		}
		p.serveLocked(l)
	}
	return p.met
}

// Met is how many requests have met a fault other than Pass so far.
func (p *FaultProxy) Met() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// Close stops the proxy and ends every request it holds.
func (p *FaultProxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	close(p.changed)
	if p.l != nil {
		p.l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.client.CloseIdleConnections()
}

func (p *FaultProxy) serve(l net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(l)
}

func (p *FaultProxy) serveLocked(l net.Listener) {
	p.l = l
	srv := &http.Server{
		Handler: http.HandlerFunc(p.handle),
		ConnState: func(c net.Conn, s http.ConnState) {
			p.mu.Lock()
			defer p.mu.Unlock()
			switch s {
			case http.StateNew:
				if p.closed || p.fault == Refuse {
					c.Close()
					return
				}
				p.conns[c] = true
			case http.StateClosed, http.StateHijacked:
				delete(p.conns, c)
			}
		},
		ErrorLog: nil,
	}
	go srv.Serve(l)
}

// SetBefore has f called with each request before it meets the fault,
// outside the proxy's lock: a test holds requests there until an event of
// its own (a lease renewal) has come. nil calls nothing.
func (p *FaultProxy) SetBefore(f func(*http.Request)) {
	if f == nil {
		p.before.Store(nil)
		return
	}
	p.before.Store(&f)
}

// meet returns the fault r meets and the channel closed when it changes.
func (p *FaultProxy) meet(r *http.Request) (Fault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fault
	if p.match != nil && !p.match(r) {
		f = Pass
	}
	if f != Pass {
		p.seen++
	}
	if f != Pass || p.fault == Pass {
		met := p.met
		p.metOnce.Do(func() { close(met) })
	}
	return f, p.changed
}

func (p *FaultProxy) handle(w http.ResponseWriter, r *http.Request) {
	if f := p.before.Load(); f != nil {
		(*f)(r)
	}
	f, changed := p.meet(r)
	switch f.kind {
	case "hang":
		select {
		case <-changed:
		case <-r.Context().Done():
		}
		panic(http.ErrAbortHandler) // closes the connection unanswered
	case "status":
		answerStatus(w, r, f.status)
		return
	}
	resp, err := p.forward(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if f == Pass {
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		return
	}
	// Cut and Trickle write the answer's bytes on the connection
	// themselves.
	var raw bytes.Buffer
	resp.Write(&raw)
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	buf.Flush()
	b := raw.Bytes()
	switch f {
	case Cut:
		head := bytes.Index(b, []byte("\r\n\r\n")) + 4
		n := head / 2
		if len(b) > head {
			n = head + (len(b)-head)/2
		}
		conn.Write(b[:n])
	case Trickle:
		t := time.NewTicker(p.TrickleEvery)
		defer t.Stop()
		for i := range b {
			if _, err := conn.Write(b[i : i+1]); err != nil {
				return
			}
			select {
			case <-changed:
				return
			case <-t.C:
			}
		}
	}
}

// forward sends r to the emulator, with the emulator's address as its
// Host (fake-gcs-server serves reads only to its public host).
func (p *FaultProxy) forward(r *http.Request) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = nil
	}
	return p.client.Do(out)
}

// answerStatus answers r with code and the error the service sends with
// it: Google's JSON error for the GCS JSON API, S3's XML error for the
// rest.
func answerStatus(w http.ResponseWriter, r *http.Request, code int) {
	if strings.HasPrefix(r.URL.Path, "/storage/v1/") || strings.HasPrefix(r.URL.Path, "/upload/storage/v1/") {
		reason := "backendError"
		if code == http.StatusTooManyRequests {
			reason = "rateLimitExceeded"
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`,
			code, http.StatusText(code), http.StatusText(code), reason)
		return
	}
	s3code := map[int]string{500: "InternalError", 503: "ServiceUnavailable", 429: "SlowDown"}[code]
	if s3code == "" {
		s3code = strings.ReplaceAll(http.StatusText(code), " ", "")
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(code)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><RequestId>blobtest</RequestId><HostId>blobtest</HostId></Error>`, s3code, http.StatusText(code))
}
