package credstore_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/credstore/credstoretest"
	"github.com/mst-eval/mst/internal/testkit/oauthtest"
)

// refreshHelperEnv makes the test binary a second process that asks for
// a token of a grant the test is refreshing (see TestTokensOneRefreshAcrossProcesses).
const refreshHelperEnv = "MST_CREDSTORE_REFRESH_HELPER"

// init runs the helper before TestMain, which local_test.go owns.
func init() {
	spec := os.Getenv(refreshHelperEnv)
	if spec == "" {
		return
	}
	var task struct{ Dir, Server string }
	if err := json.Unmarshal([]byte(spec), &task); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	s, err := credstore.OpenLocal(task.Dir, "")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	s.Waiting = func(string) { fmt.Println("waiting") }
	access, _, err := (&credstore.Tokens{Store: s}).Token(context.Background(), task.Server)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("got", digest(access))
	os.Exit(0)
}

func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:8])
}

// syncBuffer is a log destination for many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// refreshEnv is an authorization server with its MCP server, a local
// store in a fresh folder, and Tokens over it logging to logs.
type refreshEnv struct {
	srv    *oauthtest.Server
	dir    string
	store  *credstore.Local
	tokens *credstore.Tokens
	logs   *syncBuffer
}

func newRefreshEnv(t *testing.T) *refreshEnv {
	t.Helper()
	e := &refreshEnv{srv: oauthtest.Start(t), dir: filepath.Join(t.TempDir(), "credentials"), logs: &syncBuffer{}}
	var err error
	if e.store, err = credstore.OpenLocal(e.dir, ""); err != nil {
		t.Fatal(err)
	}
	e.tokens = &credstore.Tokens{Store: e.store, Eval: "evals/connector.yaml", Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	return e
}

// authorize stores a grant for server from a full authorization at the
// server, whose access token lives ttl, and returns it. Tokens the
// server issues later live an hour.
func (e *refreshEnv) authorize(t *testing.T, server string, ttl time.Duration) credstore.Grant {
	t.Helper()
	e.srv.SetAccessTTL(ttl)
	tok := e.srv.Authorize(t)
	e.srv.SetAccessTTL(time.Hour)
	if tok.RefreshToken == "" || tok.Expiry.IsZero() {
		t.Fatalf("the authorization gave no refresh token or no expiry: refresh %t, expiry %v", tok.RefreshToken != "", tok.Expiry)
	}
	g := credstore.Grant{
		Server:        server,
		Resource:      e.srv.MCPURL(),
		Issuer:        e.srv.Issuer(),
		TokenEndpoint: e.srv.TokenURL(),
		ClientID:      e.srv.ClientID(),
		ClientSecret:  e.srv.ClientSecret(),
		Scopes:        []string{oauthtest.Scope},
		Token:         &oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry},
		Granted:       time.Now(),
	}
	if err := e.store.Put(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

func (e *refreshEnv) stored(t *testing.T, server string) credstore.Grant {
	t.Helper()
	g, err := e.store.Get(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// refreshAt asks the token endpoint directly for a refresh of refresh.
func (e *refreshEnv) refreshAt(ctx context.Context, refresh string) (*oauth2.Token, error) {
	return e.srv.Config("").TokenSource(ctx, &oauth2.Token{RefreshToken: refresh}).Token()
}

func TestTokensFreshIsNotRefreshed(t *testing.T) {
	e := newRefreshEnv(t)
	g := e.authorize(t, "fresh", time.Hour)
	access, expires, err := e.tokens.Token(t.Context(), "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if access != g.Token.AccessToken || !expires.Equal(g.Token.Expiry) {
		t.Errorf("Token gave another token than the stored one (expiry %v, stored %v)", expires, g.Token.Expiry)
	}
	if c := e.srv.Counts(); c.TokenRequests != 1 || c.Refreshes != 0 {
		t.Errorf("counts = %+v, want only the code exchange", c)
	}
	if d := credstoretest.Diff(e.stored(t, "fresh"), g); d != "" {
		t.Errorf("the stored grant changed: %s", d)
	}
}

func TestTokensRefreshStoresRotatedToken(t *testing.T) {
	for _, c := range []struct {
		name string
		ttl  time.Duration // of the stored access token
	}{
		{"expired", -time.Second}, // stored as already expired
		{"within the margin", time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newRefreshEnv(t)
			g := e.authorize(t, "docs", time.Hour)
			g.Token.Expiry = time.Now().Add(c.ttl)
			if err := e.store.Put(t.Context(), g); err != nil {
				t.Fatal(err)
			}
			oldRefresh := g.Token.RefreshToken
			before := time.Now()
			access, expires, err := e.tokens.Token(t.Context(), "docs")
			if err != nil {
				t.Fatal(err)
			}
			if access == g.Token.AccessToken {
				t.Error("Token gave back the expiring access token")
			}
			if !expires.After(before.Add(50 * time.Minute)) {
				t.Errorf("the refreshed token expires at %v, want about an hour from now", expires)
			}
			if n := e.srv.Counts().Refreshes; n != 1 {
				t.Errorf("%d refreshes, want 1", n)
			}
			now := e.stored(t, "docs")
			if now.Token.AccessToken != access || !now.Token.Expiry.Equal(expires) {
				t.Error("the store does not hold the token Token returned")
			}
			if now.Token.RefreshToken == g.Token.RefreshToken || now.Token.RefreshToken == "" {
				t.Error("the store does not hold the rotated refresh token")
			}
			if now.Refreshed.Before(before) {
				t.Errorf("Refreshed = %v, want after %v", now.Refreshed, before)
			}
			g.Token, g.Refreshed, now.Token, now.Refreshed = nil, time.Time{}, nil, time.Time{}
			if d := credstoretest.Diff(now, g); d != "" {
				t.Errorf("a refresh changed more than the token: %s", d)
			}
			// The old refresh token is dead; the stored one works.
			var re *oauth2.RetrieveError
			if _, err := e.refreshAt(t.Context(), oldRefresh); !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
				t.Errorf("refreshing with the replaced refresh token: %v, want invalid_grant", err)
			}
			if _, err := e.refreshAt(t.Context(), e.stored(t, "docs").Token.RefreshToken); err != nil {
				t.Errorf("refreshing with the stored refresh token: %v", err)
			}
		})
	}
}

// Two callers that find one token expiring at once refresh it once: the
// second waits for the first's lock, reads the grant again and takes the
// token the first stored. (Without the second read it would refresh with
// the refresh token the first one's refresh replaced, and be refused.)
func TestTokensOneRefreshInProcess(t *testing.T) {
	e := newRefreshEnv(t)
	e.authorize(t, "shared", time.Minute)
	other, err := credstore.OpenLocal(e.dir, "")
	if err != nil {
		t.Fatal(err)
	}
	second := &credstore.Tokens{Store: other, Logger: e.tokens.Logger}

	hold := e.srv.HoldNext()
	type result struct {
		access string
		err    error
	}
	first := make(chan result, 1)
	go func() {
		access, _, err := e.tokens.Token(t.Context(), "shared")
		first <- result{access, err}
	}()
	select {
	case <-hold.Arrived(): // the first is refreshing, inside the lock
	case r := <-first:
		t.Fatalf("Token returned (%v) without refreshing the expiring token", r.err)
	}
	waiting := make(chan struct{})
	other.Waiting = func(string) { close(waiting) }
	ctx := t.Context()
	then := make(chan result, 1)
	go func() {
		access, _, err := second.Token(ctx, "shared")
		then <- result{access, err}
	}()
	select {
	case <-waiting:
	case r := <-then:
		t.Fatalf("the second Token returned (%v) without waiting for the first's lock", r.err)
	}
	hold.Release()
	r1, r2 := <-first, <-then
	if r1.err != nil || r2.err != nil {
		t.Fatalf("first: %v; second: %v", r1.err, r2.err)
	}
	if r1.access != r2.access {
		t.Error("the two callers got different access tokens")
	}
	if c := e.srv.Counts(); c.Refreshes != 1 || c.TokenRequests != 2 {
		t.Errorf("counts = %+v, want one exchange and one refresh", c)
	}
	if got := e.stored(t, "shared").Token.AccessToken; got != r1.access {
		t.Error("the store does not hold the token both got")
	}
}

// The same across processes: a second process that asks while this one
// refreshes waits, and gets the token this one stored.
func TestTokensOneRefreshAcrossProcesses(t *testing.T) {
	e := newRefreshEnv(t)
	e.authorize(t, "across", time.Minute)

	hold := e.srv.HoldNext()
	first := make(chan error, 1)
	var access string
	go func() {
		var err error
		access, _, err = e.tokens.Token(t.Context(), "across")
		first <- err
	}()
	select {
	case <-hold.Arrived():
	case err := <-first:
		t.Fatalf("Token returned (%v) without refreshing the expiring token", err)
	}

	spec, _ := json.Marshal(map[string]string{"Dir": e.dir, "Server": "across"})
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), refreshHelperEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("the helper process ended early: %v", cmd.Wait())
		}
		return lines.Text()
	}
	if line := next(); line != "waiting" {
		t.Fatalf("the helper said %q, want waiting", line)
	}
	hold.Release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if line, want := next(), "got "+digest(access); line != want {
		t.Errorf("the helper said %q, want %q (the token this process stored)", line, want)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the helper process: %v", err)
	}
	if c := e.srv.Counts(); c.Refreshes != 1 {
		t.Errorf("counts = %+v, want one refresh", c)
	}
}

// A grant the authorization server refuses (revoked, or its refresh
// token replaced by a refresh elsewhere) gives an error that names the
// server and says to run `mst auth` again, and the stored grant is left.
func TestTokensRefusedGrant(t *testing.T) {
	for _, c := range []struct {
		name   string
		refuse func(t *testing.T, e *refreshEnv, g credstore.Grant)
	}{
		{"revoked", func(t *testing.T, e *refreshEnv, g credstore.Grant) {
			if err := e.srv.Revoke(g.Token.RefreshToken); err != nil {
				t.Fatal(err)
			}
		}},
		{"refreshed elsewhere", func(t *testing.T, e *refreshEnv, g credstore.Grant) {
			if _, err := e.refreshAt(t.Context(), g.Token.RefreshToken); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newRefreshEnv(t)
			g := e.authorize(t, "it's mine", time.Minute)
			c.refuse(t, e, g)
			_, _, err := e.tokens.Token(t.Context(), "it's mine")
			if !errors.Is(err, credstore.ErrGrantRefused) {
				t.Fatalf("err = %v, want ErrGrantRefused", err)
			}
			for _, want := range []string{`"it's mine"`, "refused", `mst auth 'it'\''s mine' -c evals/connector.yaml`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if d := credstoretest.Diff(e.stored(t, "it's mine"), g); d != "" {
				t.Errorf("the stored grant changed: %s", d)
			}
		})
	}
}

// A token endpoint that fails or cannot be reached gives an error naming
// the server and the endpoint, and leaves the stored grant as it was, so
// a later try works.
func TestTokensEndpointDown(t *testing.T) {
	t.Run("answers 500", func(t *testing.T) {
		e := newRefreshEnv(t)
		g := e.authorize(t, "flaky", time.Minute)
		e.srv.FailNext(1)
		_, _, err := e.tokens.Token(t.Context(), "flaky")
		var re *credstore.RefreshError
		if !errors.As(err, &re) || re.Status != 500 || re.Code != "server_error" {
			t.Fatalf("err = %v, want a RefreshError with status 500 and server_error", err)
		}
		for _, want := range []string{`"flaky"`, e.srv.TokenURL(), "500"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if errors.Is(err, credstore.ErrGrantRefused) {
			t.Error("a failing endpoint is reported as a refused grant")
		}
		if d := credstoretest.Diff(e.stored(t, "flaky"), g); d != "" {
			t.Errorf("the stored grant changed: %s", d)
		}
		if c := e.srv.Counts(); c.Failed != 1 || c.TokenRequests != 2 {
			t.Errorf("counts = %+v, want one failed request after the exchange", c)
		}
		if _, _, err := e.tokens.Token(t.Context(), "flaky"); err != nil {
			t.Errorf("the next try: %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		e := newRefreshEnv(t)
		g := e.authorize(t, "gone", time.Minute)
		dead := httptest.NewServer(nil)
		dead.Close()
		g.TokenEndpoint = dead.URL + "/token"
		if err := e.store.Put(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		_, _, err := e.tokens.Token(t.Context(), "gone")
		var re *credstore.RefreshError
		if !errors.As(err, &re) || re.Status != 0 {
			t.Fatalf("err = %v, want a RefreshError without a status", err)
		}
		for _, want := range []string{`"gone"`, g.TokenEndpoint} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if d := credstoretest.Diff(e.stored(t, "gone"), g); d != "" {
			t.Errorf("the stored grant changed: %s", d)
		}
	})
}

func TestTokensNoGrant(t *testing.T) {
	e := newRefreshEnv(t)
	_, _, err := e.tokens.Token(t.Context(), "never")
	if !errors.Is(err, credstore.ErrNotFound) || !strings.Contains(err.Error(), "mst auth never -c evals/connector.yaml") {
		t.Errorf("err = %v, want ErrNotFound saying to run mst auth never -c evals/connector.yaml", err)
	}
	g := credstoretest.NewGrant("no-refresh")
	g.Token.RefreshToken = ""
	g.Token.Expiry = time.Now().Add(-time.Minute)
	if err := e.store.Put(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.tokens.Token(t.Context(), "no-refresh")
	if !errors.Is(err, credstore.ErrNoRefresh) || !strings.Contains(err.Error(), "mst auth no-refresh") {
		t.Errorf("err = %v, want ErrNoRefresh saying to run mst auth no-refresh", err)
	}
}

// The MCP server takes the refreshed access token and refuses the
// expired one.
func TestTokensMCPServer(t *testing.T) {
	e := newRefreshEnv(t)
	g := e.authorize(t, "notes", 10*time.Minute)
	first, _, err := e.tokens.Token(t.Context(), "notes")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.srv.Echo(t.Context(), first, "hello"); err != nil || got != "hello" {
		t.Fatalf("echo with the first token: %q, %v", got, err)
	}
	// Both clocks move past the token's life.
	e.srv.Advance(11 * time.Minute)
	g.Token.Expiry = time.Now().Add(-time.Minute)
	if err := e.store.Put(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	refused := e.srv.Counts().MCPRefused
	if _, err := e.srv.Echo(t.Context(), first, "again"); err == nil {
		t.Fatal("the MCP server took an expired access token")
	}
	if e.srv.Counts().MCPRefused == refused {
		t.Error("the MCP server's verifier did not refuse the expired token")
	}
	fresh, _, err := e.tokens.Token(t.Context(), "notes")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.srv.Echo(t.Context(), fresh, "after"); err != nil || got != "after" {
		t.Errorf("echo with the refreshed token: %q, %v", got, err)
	}
	if _, err := e.srv.Echo(t.Context(), "oauthtest-access-madeup", "x"); err == nil {
		t.Error("the MCP server took a token it never issued")
	}
}

// No access token, refresh token or client secret appears in an error or
// a log line, whatever goes wrong, even when the authorization server
// echoes a secret in its answer.
func TestTokensNoSecretInErrorsOrLogs(t *testing.T) {
	e := newRefreshEnv(t)
	var texts []string
	var secrets []string
	keep := func(g credstore.Grant) {
		secrets = append(secrets, g.ClientSecret)
		if g.Token != nil {
			secrets = append(secrets, g.Token.AccessToken, g.Token.RefreshToken)
		}
	}
	try := func(server string) {
		access, _, err := e.tokens.Token(t.Context(), server)
		if access != "" {
			secrets = append(secrets, access)
		}
		if err != nil {
			texts = append(texts, err.Error())
		}
		if g, err := e.store.Get(t.Context(), server); err == nil {
			keep(g)
		}
	}

	// A refresh that works, and one that rotates after it.
	g := e.authorize(t, "ok", time.Minute)
	keep(g)
	try("ok")
	// Refused.
	g = e.authorize(t, "revoked", time.Minute)
	keep(g)
	e.srv.Revoke(g.Token.RefreshToken)
	try("revoked")
	// Failing.
	g = e.authorize(t, "failing", time.Minute)
	keep(g)
	e.srv.FailNext(1)
	try("failing")
	// A wrong client secret, which mockoidc echoes in its answer.
	g = e.authorize(t, "echoed", time.Minute)
	g.ClientSecret = credstoretest.Canary("client-secret")
	if err := e.store.Put(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	keep(g)
	try("echoed")
	if len(texts) != 3 {
		t.Fatalf("got %d errors, want 3 (revoked, failing, echoed): %q", len(texts), texts)
	}
	if !strings.Contains(texts[2], "[redacted]") {
		t.Errorf("the answer that echoes the client secret was not redacted (or no longer echoes it): %q", texts[2])
	}
	texts = append(texts, e.logs.String())
	for _, text := range texts {
		for _, v := range secrets {
			if v != "" && strings.Contains(text, v) {
				t.Errorf("a secret value appears in %q", text)
			}
		}
	}
	if !strings.Contains(e.logs.String(), "refreshed an access token") {
		t.Errorf("the log has no line for the refresh: %s", e.logs)
	}
}
