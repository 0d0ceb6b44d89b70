package run

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
)

// lockedBuffer is a log destination for many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// tokenSourceFor opens a local credential store holding a fresh grant for
// each of fresh, and for each of stale a grant whose token has expired and
// whose token endpoint refuses connections, so it cannot be refreshed.
func tokenSourceFor(t *testing.T, names map[string]string, fresh, stale []string) (shard.TokenSource, *lockedBuffer) {
	t.Helper()
	store, err := credstore.OpenLocal(filepath.Join(t.TempDir(), "credentials"), "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/token"
	ln.Close()
	put := func(server string, expiry time.Time) {
		g := credstore.Grant{
			Server: server, Resource: "http://127.0.0.1:1/mcp", TokenEndpoint: closed,
			ClientID: "client", ClientSecret: "SECRET-client-" + server,
			Token:   &oauth2.Token{AccessToken: "ACCESS-" + server, RefreshToken: "REFRESH-" + server, TokenType: "Bearer", Expiry: expiry},
			Granted: time.Now(),
		}
		if err := store.Put(t.Context(), g); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range fresh {
		put(s, time.Now().Add(time.Hour))
	}
	for _, s := range stale {
		put(s, time.Now().Add(-time.Hour))
	}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	return shardTokens{&credstore.Tokens{Store: store, Eval: "evals/connector.yaml", Logger: log}, names, log}, logs
}

func TestShardTokens(t *testing.T) {
	src, _ := tokenSourceFor(t, map[string]string{"A1": "alpha", "A2": "alpha", "B": "beta", "C": "gamma"}, []string{"alpha", "beta"}, nil)
	// names lists the names with a value, then those refused (each with
	// a reason that says to run mst auth).
	names := func(m map[string]shard.Token) string {
		var out, refused []string
		for k, v := range m {
			switch {
			case v.Refused != "":
				if v.Value != "" || !strings.Contains(v.Refused, "mst auth") {
					t.Errorf("token %s: refused %q with a value, or without saying to run mst auth", k, v.Refused)
				}
				refused = append(refused, k)
			case v.Value == "" || v.Expires.IsZero():
				t.Errorf("token %s has no value or no expiry", k)
			default:
				out = append(out, k)
			}
		}
		slices.Sort(out)
		slices.Sort(refused)
		return strings.Join(out, ",") + "/" + strings.Join(refused, ",")
	}
	for _, c := range []struct {
		req  protocol.NeedTokens
		want string
	}{
		{protocol.NeedTokens{Servers: []string{"alpha"}}, "A1,A2/"},
		{protocol.NeedTokens{Names: []string{"B"}}, "B/"},
		{protocol.NeedTokens{Names: []string{"A2"}, Servers: []string{"beta"}}, "A2,B/"},
		{protocol.NeedTokens{Names: []string{"nope"}, Servers: []string{"delta"}}, "/"},
		{protocol.NeedTokens{Names: []string{"B", "C"}}, "B/C"}, // gamma has no grant
		{protocol.NeedTokens{Names: []string{"C"}}, "/C"},
	} {
		got, err := src.Tokens(t.Context(), c.req)
		if err != nil || names(got) != c.want {
			t.Errorf("Tokens(%+v) = %s, %v; want %s", c.req, names(got), err, c.want)
		}
	}
}

// A token that cannot be had comes back refused, is logged, and neither
// the reason nor the log holds a secret of the grant.
func TestShardTokensRefusedHoldNoSecret(t *testing.T) {
	src, logs := tokenSourceFor(t, map[string]string{"OK_TOKEN": "ok", "STALE_TOKEN": "stale"}, []string{"ok"}, []string{"stale"})
	got, err := src.Tokens(t.Context(), protocol.NeedTokens{Servers: []string{"ok", "stale"}})
	if err != nil || len(got) != 2 || got["OK_TOKEN"].Value != "ACCESS-ok" || got["STALE_TOKEN"].Refused == "" || got["STALE_TOKEN"].Value != "" {
		t.Fatalf("Tokens gave %+v, %v; want OK_TOKEN's value and STALE_TOKEN refused", got, err)
	}
	if !strings.Contains(logs.String(), "no access token for a worker") || !strings.Contains(logs.String(), "stale") {
		t.Errorf("the refusal is not logged with its server: %s", logs)
	}
	for _, text := range []string{logs.String(), got["STALE_TOKEN"].Refused} {
		for _, v := range []string{"SECRET-client-stale", "REFRESH-stale", "ACCESS-stale", "ACCESS-ok"} {
			if strings.Contains(text, v) {
				t.Errorf("%q appears in %q", v, text)
			}
		}
	}
}
