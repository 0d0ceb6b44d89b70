package providertest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
)

// ProcSnoop is a proxy in front of a fake provider server that reads one
// process's /proc cmdline and environ when the first request arrives, so a
// test learns what a CLI's argv and environment held while it waited on the
// model. Send the CLI's pid on PID before its first request; the request
// waits for it. Linux only (it reads /proc).
type ProcSnoop struct {
	// URL is the proxy's address: give it to the client as its base URL.
	URL string
	// PID takes the pid of the process to read.
	PID chan<- int

	mu               sync.Mutex
	cmdline, environ []byte
}

// NewProcSnoop starts a ProcSnoop in front of target (a fake provider's
// URL), closed when the test ends. also, when not nil, is called with the
// pid at the same moment, for what else a test wants to read then.
func NewProcSnoop(t testing.TB, target string, also func(pid int)) *ProcSnoop {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	pids := make(chan int, 1)
	s := &ProcSnoop{PID: pids}
	var once sync.Once
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			pid := <-pids
			dir := "/proc/" + strconv.Itoa(pid)
			cmdline, _ := os.ReadFile(dir + "/cmdline")
			environ, _ := os.ReadFile(dir + "/environ")
			s.mu.Lock()
			s.cmdline, s.environ = cmdline, environ
			s.mu.Unlock()
			if also != nil {
				also(pid)
			}
		})
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Cmdline is the process's /proc cmdline as read (NUL-separated), nil
// before the first request.
func (s *ProcSnoop) Cmdline() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmdline
}

// Environ is the process's /proc environ as read (NUL-separated), nil
// before the first request.
func (s *ProcSnoop) Environ() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.environ
}
