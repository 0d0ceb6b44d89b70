package servers_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/internal/testkit/testserver"
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

// TestReadyTools: the readiness check returns every tool each server
// lists, in the order of the list, with the tools a variant hides named
// apart, so a caller can check graders' tool names against them.
func TestReadyTools(t *testing.T) {
	t.Parallel()
	many := testServer(t, "many", "--many")
	many.Tools = map[string]servers.ToolOverride{"filler_07": {Hidden: true}, testserver.UnicodeTool: {Hidden: true}, "echo": {}}
	plain := httpFixture(t, "plain", testserver.New(true), nil)
	listed, err := servers.ReadyTools(t.Context(), []servers.Server{many, plain})
	if err != nil {
		t.Fatalf("ReadyTools = %v", err)
	}
	if len(listed) != 2 || listed[0].Server != "many" || listed[1].Server != "plain" {
		t.Fatalf("ReadyTools(many, plain) = %+v, want one entry per server, in order", listed)
	}
	base := []string{"echo", "sleep", "fail", "crash"}
	if diff := cmp.Diff(base, listed[1].Names(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("ReadyTools: tools of plain (-want +got):\n%s", diff)
	}
	names := listed[0].Names()
	if got, want := len(names), len(base)+testserver.ManyTools-2+2; got != want {
		t.Errorf("ReadyTools: many lists %d tools, want %d: %v", got, want, names)
	}
	if diff := cmp.Diff([]string{"filler_07", testserver.UnicodeTool}, listed[0].Hidden, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("ReadyTools: hidden tools of many (-want +got):\n%s", diff)
	}
	for _, tool := range listed[0].Offered {
		if tool.Name == "filler_07" || tool.Name == testserver.UnicodeTool {
			t.Errorf("ReadyTools: %s is hidden but listed as offered", tool.Name)
		}
	}
	for _, want := range []string{testserver.LongTool, "filler_42", "filler_07", testserver.UnicodeTool, "echo"} {
		if !slices.Contains(names, want) {
			t.Errorf("ReadyTools: many's names %v lack %s", names, want)
		}
	}

	// A failing server leaves a zero entry; the others are still listed.
	listed, err = servers.ReadyTools(t.Context(), []servers.Server{testServer(t, "db", "--fail-start"), plain})
	if err == nil || !strings.Contains(err.Error(), "server db") {
		t.Errorf("ReadyTools(failing, plain) error = %v, want one naming server db", err)
	}
	if len(listed) != 2 || listed[0].Server != "" || listed[1].Server != "plain" {
		t.Errorf("ReadyTools(failing, plain) = %+v, want a zero entry then plain", listed)
	}
}
