package servers_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/testserver"
	"github.com/mst-eval/mst/servers"
)

func TestReady(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		servers func(t *testing.T) []servers.Server
		want    []string // in the error; none means Ready succeeds
		notWant []string
	}{
		{"no servers", func(t *testing.T) []servers.Server { return nil }, nil, nil},
		{"stdio and http",
			func(t *testing.T) []servers.Server {
				return []servers.Server{testServer(t, "local"), httpFixture(t, "remote", testserver.New(true), nil)}
			}, nil, nil},
		{"two of three fail",
			func(t *testing.T) []servers.Server {
				return []servers.Server{testServer(t, "good"), testServer(t, "db", "--fail-start"), testServer(t, "empty", "--no-tools")}
			},
			[]string{"server db", "cannot open the database at /nonexistent/db.sqlite", "server empty", "lists no tools"},
			[]string{"server good"}},
		{"one hangs",
			func(t *testing.T) []servers.Server {
				slow := testServer(t, "slow", "--hang")
				slow.StartupTimeout = 500 * time.Millisecond
				return []servers.Server{slow, httpFixture(t, "remote", testserver.New(true), nil)}
			},
			[]string{"server slow", "no answer within 500ms", "warming up a very slow cache"},
			[]string{"server remote"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			list := tc.servers(t)
			err := servers.Ready(t.Context(), list)
			if tc.want == nil {
				if err != nil {
					t.Errorf("Ready(%d servers) = %v, want nil", len(list), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Ready(%d servers) = nil, want an error", len(list))
			}
			if !errors.Is(err, servers.ErrServer) {
				t.Errorf("errors.Is(Ready(%d servers) = %q, ErrServer) = false, want true", len(list), err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Ready(%d servers) = %q, want it to contain %q", len(list), err, want)
				}
			}
			for _, notWant := range tc.notWant {
				if strings.Contains(err.Error(), notWant) {
					t.Errorf("Ready(%d servers) = %q, want no mention of %q", len(list), err, notWant)
				}
			}
		})
	}
}

// TestReadyChecksServersAtOnce has two servers that each answer only once
// both have been reached: Ready succeeds only if it checks them at the same
// time.
func TestReadyChecksServersAtOnce(t *testing.T) {
	t.Parallel()
	var (
		reached sync.WaitGroup
		once    [2]sync.Once
	)
	reached.Add(2)
	barrier := func(i int) func(http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				once[i].Do(reached.Done)
				reached.Wait()
				next.ServeHTTP(w, r)
			})
		}
	}
	list := []servers.Server{
		httpFixture(t, "a", testserver.New(true), barrier(0)),
		httpFixture(t, "b", testserver.New(true), barrier(1)),
	}
	for i := range list {
		// Long enough never to expire on a loaded machine; a Ready that
		// checked one server after the other would fail after it.
		list[i].StartupTimeout = 20 * time.Second
	}
	if err := servers.Ready(t.Context(), list); err != nil {
		t.Errorf("Ready(2 servers that wait for each other) = %v, want nil", err)
	}
}
