// Package credstoretest is the conformance suite every credential store
// passes, the way runnertest checks a runner.
//
// Run checks a credstore.Store that open makes:
//
//   - Put then Get returns every value, and a Put that rotates the
//     refresh token replaces the old one;
//   - Get and Delete of a server with no grant wrap credstore.ErrNotFound,
//     and Delete removes a grant for good;
//   - List carries no secret: its JSON holds no access token, refresh
//     token or client secret, Listed says which the grants hold, and Put
//     refuses a listed grant;
//   - any non-empty UTF-8 name works (long, Unicode, slashes, dots, names
//     that differ in case only), and Get and List give it back exactly;
//     an empty or non-UTF-8 name is refused;
//   - Puts of different servers at once all land, and a Get during Puts
//     of one server sees one whole grant or another;
//   - WithLock excludes other holders in this process and in another one,
//     calls the store's Params.LockWaiting before it waits, gives up
//     when its ctx ends, runs a nested WithLock at once, and a refresh
//     done under it (Get, Put) sees the grant the last holder stored.
//
// Orderings are checked through events (channels, a helper process's
// output), never by sleeping. The cross-process checks start the test
// binary again as a helper, recognised by an environment variable, so a
// package that runs the suite calls Helper first thing in its TestMain,
// with the same open function it gives Run:
//
//	func TestMain(m *testing.M) {
//		credstoretest.Helper(open)
//		os.Exit(m.Run())
//	}
package credstoretest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mst-eval/mst/credstore"
)

// Open returns the store whose grants and locks live in dir, a folder the
// suite made for one check: the local store uses the folder itself; a
// store elsewhere derives a name from it (a prefix in a bucket, a
// keyring's service name). Calls with the same dir, in this process or
// another, reach the same grants. The store calls waiting as it would
// Params.LockWaiting.
type Open func(dir string, waiting func(server string)) (credstore.Store, error)

// waitHook is what a store the suite opened calls when its WithLock has to
// wait: the function the running check set, if any.
type waitHook struct{ f atomic.Pointer[func(string)] }

func (h *waitHook) call(server string) {
	if f := h.f.Load(); f != nil {
		(*f)(server)
	}
}

// hooks holds the waitHook of each store the suite opened.
var hooks sync.Map // credstore.Store -> *waitHook

// openHooked opens the store of dir with a waitHook of its own.
func openHooked(open Open, dir string) (credstore.Store, error) {
	h := &waitHook{}
	s, err := open(dir, h.call)
	if err == nil {
		hooks.Store(s, h)
	}
	return s, err
}

// onWait makes s call f when a WithLock of s has to wait.
func onWait(s credstore.Store, f func(server string)) {
	h, ok := hooks.Load(s)
	if !ok {
		panic("credstoretest: a store the suite did not open")
	}
	h.(*waitHook).f.Store(&f)
}

// Canary returns a random value that appears nowhere else, for a token or
// secret a test then looks for where it must not be.
func Canary(what string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return "canary-" + what + "-" + hex.EncodeToString(b)
}

// NewGrant returns a grant for server with every field set, and with
// canary values for its access token, refresh token and client secret.
func NewGrant(server string) credstore.Grant {
	now := time.Now().Truncate(time.Second)
	return credstore.Grant{
		Server:        server,
		Resource:      "https://mcp.example.com/" + hex.EncodeToString([]byte(server)),
		Issuer:        "https://auth.example.com",
		TokenEndpoint: "https://auth.example.com/oauth/token",
		ClientID:      "client-" + Canary("id"),
		ClientSecret:  Canary("client-secret"),
		Scopes:        []string{"read", "write:all"},
		Token: &oauth2.Token{
			AccessToken:  Canary("access"),
			TokenType:    "Bearer",
			RefreshToken: Canary("refresh"),
			Expiry:       now.Add(time.Hour),
		},
		Granted:   now.Add(-time.Hour),
		Refreshed: now,
	}
}

// Diff says how got differs from want, or "" when they hold the same
// values.
func Diff(got, want credstore.Grant) string {
	var d []string
	field := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s = %q, want %q", name, g, w))
		}
	}
	field("Server", got.Server, want.Server)
	field("Resource", got.Resource, want.Resource)
	field("Issuer", got.Issuer, want.Issuer)
	field("TokenEndpoint", got.TokenEndpoint, want.TokenEndpoint)
	field("ClientID", got.ClientID, want.ClientID)
	field("ClientSecret", got.ClientSecret, want.ClientSecret)
	if !slices.Equal(got.Scopes, want.Scopes) {
		d = append(d, fmt.Sprintf("Scopes = %q, want %q", got.Scopes, want.Scopes))
	}
	if !got.Granted.Equal(want.Granted) {
		d = append(d, fmt.Sprintf("Granted = %v, want %v", got.Granted, want.Granted))
	}
	if !got.Refreshed.Equal(want.Refreshed) {
		d = append(d, fmt.Sprintf("Refreshed = %v, want %v", got.Refreshed, want.Refreshed))
	}
	if (got.Listed == nil) != (want.Listed == nil) || got.Listed != nil && *got.Listed != *want.Listed {
		d = append(d, fmt.Sprintf("Listed = %+v, want %+v", got.Listed, want.Listed))
	}
	switch {
	case (got.Token == nil) != (want.Token == nil):
		d = append(d, fmt.Sprintf("Token = %v, want %v", got.Token != nil, want.Token != nil))
	case got.Token != nil:
		field("Token.AccessToken", got.Token.AccessToken, want.Token.AccessToken)
		field("Token.RefreshToken", got.Token.RefreshToken, want.Token.RefreshToken)
		field("Token.TokenType", got.Token.TokenType, want.Token.TokenType)
		if !got.Token.Expiry.Equal(want.Token.Expiry) {
			d = append(d, fmt.Sprintf("Token.Expiry = %v, want %v", got.Token.Expiry, want.Token.Expiry))
		}
	}
	return strings.Join(d, "; ")
}

// Secrets are the secret values of g, for searching where they must not
// be.
func Secrets(g credstore.Grant) []string {
	var s []string
	if g.ClientSecret != "" {
		s = append(s, g.ClientSecret)
	}
	if g.Token != nil {
		for _, v := range []string{g.Token.AccessToken, g.Token.RefreshToken} {
			if v != "" {
				s = append(s, v)
			}
		}
	}
	return s
}

// Run checks the store open makes; every check gets a fresh folder.
func Run(t *testing.T, open Open) {
	newStore := func(t *testing.T) (credstore.Store, string) {
		dir := t.TempDir()
		s, err := openHooked(open, dir)
		if err != nil {
			t.Fatalf("opening the store: %v", err)
		}
		return s, dir
	}
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		testRoundTrip(t, s)
	})
	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		testNotFound(t, s)
	})
	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		testDelete(t, s)
	})
	t.Run("ListHasNoSecrets", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		testList(t, s)
	})
	t.Run("Names", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		testNames(t, s)
	})
	t.Run("ConcurrentPut", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		testConcurrentPut(t, s)
	})
	t.Run("ReplaceIsWhole", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		testReplaceIsWhole(t, s)
	})
	t.Run("WithLock", func(t *testing.T) {
		t.Parallel()
		s, dir := newStore(t)
		// A second store over the same grants, as a second open in one
		// process (another command's) would make.
		s2, err := openHooked(open, dir)
		if err != nil {
			t.Fatalf("opening the store again: %v", err)
		}
		testWithLock(t, s, s)
		testWithLock(t, s, s2)
		testLockNested(t, s)
		testLockCancel(t, s)
	})
	t.Run("WithLockAcrossProcesses", func(t *testing.T) {
		t.Parallel()
		s, dir := newStore(t)
		testHelperHolds(t, s, dir)
		testHelperWaits(t, s, dir)
		testCancelWhileHelperHolds(t, s, dir)
	})
}

func testRoundTrip(t *testing.T, s credstore.Store) {
	ctx := t.Context()
	g := NewGrant("files")
	if err := s.Put(ctx, g); err != nil {
		t.Fatalf("Put: %v", err)
	}
	got, err := s.Get(ctx, g.Server)
	if err != nil {
		t.Fatalf("Get after Put: %v", err)
	}
	if d := Diff(got, g); d != "" {
		t.Errorf("Get after Put: %s", d)
	}
	// A refresh that rotates the refresh token.
	old := g.Token.RefreshToken
	g.Token = &oauth2.Token{AccessToken: Canary("access2"), TokenType: "Bearer", RefreshToken: Canary("refresh2"), Expiry: g.Token.Expiry.Add(time.Hour)}
	g.Refreshed = g.Refreshed.Add(time.Hour)
	if err := s.Put(ctx, g); err != nil {
		t.Fatalf("Put of a rotated token: %v", err)
	}
	got, err = s.Get(ctx, g.Server)
	if err != nil {
		t.Fatalf("Get after rotation: %v", err)
	}
	if d := Diff(got, g); d != "" {
		t.Errorf("Get after rotation: %s", d)
	}
	if got.Token != nil && got.Token.RefreshToken == old {
		t.Errorf("Get after rotation returned the old refresh token")
	}
	// A grant with only a name and no token is kept as it is.
	bare := credstore.Grant{Server: "bare"}
	if err := s.Put(ctx, bare); err != nil {
		t.Fatalf("Put of a grant with no token: %v", err)
	}
	if got, err := s.Get(ctx, "bare"); err != nil || Diff(got, bare) != "" {
		t.Errorf("Get of a grant with no token = %+v, %v; want %+v", got, err, bare)
	}
}

func testNotFound(t *testing.T, s credstore.Store) {
	ctx := t.Context()
	for _, name := range []string{"never-stored", "ünïcode/with/slashes"} {
		_, err := s.Get(ctx, name)
		if !errors.Is(err, credstore.ErrNotFound) {
			t.Errorf("Get(%q) from an empty store = %v; want an error wrapping ErrNotFound", name, err)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("Get(%q) error %q does not name the server", name, err)
		}
	}
	if l, err := s.List(ctx); err != nil || len(l) != 0 {
		t.Errorf("List of an empty store = %v, %v; want nothing", l, err)
	}
	if err := s.Put(ctx, NewGrant("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "two"); !errors.Is(err, credstore.ErrNotFound) {
		t.Errorf("Get of another server = %v; want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, s credstore.Store) {
	ctx := t.Context()
	a, b := NewGrant("a"), NewGrant("b")
	for _, g := range []credstore.Grant{a, b} {
		if err := s.Put(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, credstore.ErrNotFound) {
		t.Errorf("Get after Delete = %v; want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a"); !errors.Is(err, credstore.ErrNotFound) {
		t.Errorf("Delete of a deleted grant = %v; want ErrNotFound", err)
	}
	if got, err := s.Get(ctx, "b"); err != nil || Diff(got, b) != "" {
		t.Errorf("Get of the grant not deleted = %v; want it unchanged (%s)", err, Diff(got, b))
	}
	l, err := s.List(ctx)
	if err != nil || len(l) != 1 || l[0].Server != "b" {
		t.Errorf("List after Delete = %v, %v; want only b", l, err)
	}
	// Put again after Delete works.
	if err := s.Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "a"); err != nil || Diff(got, a) != "" {
		t.Errorf("Get after Put again = %v (%s)", err, Diff(got, a))
	}
}

func testList(t *testing.T, s credstore.Store) {
	ctx := t.Context()
	full := NewGrant("full")
	public := NewGrant("public client") // no client secret
	public.ClientSecret = ""
	expired := NewGrant("no refresh")
	expired.Token.RefreshToken = ""
	expired.Token.Expiry = time.Now().Add(-time.Minute).Truncate(time.Second)
	noToken := credstore.Grant{Server: "registered only", ClientID: "c", ClientSecret: Canary("client-secret")}
	grants := []credstore.Grant{full, public, expired, noToken}
	var secrets []string
	for _, g := range grants {
		if err := s.Put(ctx, g); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, Secrets(g)...)
	}
	l, err := s.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if !slices.IsSortedFunc(l, func(a, b credstore.Grant) int { return strings.Compare(a.Server, b.Server) }) {
		t.Errorf("List is not sorted by server: %v", servers(l))
	}
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range secrets {
		if strings.Contains(string(data), v) {
			t.Errorf("the JSON of the listing holds the secret %q: %s", v, data)
		}
	}
	if len(l) != len(grants) {
		t.Fatalf("List has %d grants, want %d: %v", len(l), len(grants), servers(l))
	}
	for _, g := range grants {
		i := slices.IndexFunc(l, func(x credstore.Grant) bool { return x.Server == g.Server })
		if i < 0 {
			t.Errorf("List misses %q", g.Server)
			continue
		}
		if d := Diff(l[i], g.Listing()); d != "" {
			t.Errorf("List's %q: %s", g.Server, d)
		}
		// A listed grant written back would erase the tokens.
		if err := s.Put(ctx, l[i]); err == nil {
			t.Errorf("Put of the listed grant %q succeeded; want it refused", g.Server)
		}
		if got, err := s.Get(ctx, g.Server); err != nil || Diff(got, g) != "" {
			t.Errorf("Get of %q after Put of its listing = %v (%s); want it unchanged", g.Server, err, Diff(got, g))
		}
	}
}

func servers(l []credstore.Grant) []string {
	var out []string
	for _, g := range l {
		out = append(out, g.Server)
	}
	return out
}

// Names are server names a store must keep apart and give back exactly.
var Names = []string{
	"github",
	"GitHub",
	"a/b/c",
	"a/b/c/",
	"../../../etc/passwd",
	".",
	"..",
	"/absolute",
	`back\slash`,
	"with space",
	"tab\tnew\nline",
	"nul\x00byte",
	"émoji 🚀 日本語 ",
	"CON",
	".hidden",
	"0000000000000000000000000000000000000000000000000000000000000000.grant",
	strings.Repeat("long-name-", 100),
	strings.Repeat("é", 300),
}

func testNames(t *testing.T, s credstore.Store) {
	ctx := t.Context()
	want := map[string]credstore.Grant{}
	for _, name := range Names {
		g := NewGrant(name)
		if err := s.Put(ctx, g); err != nil {
			t.Errorf("Put(%q): %v", name, err)
			continue
		}
		want[name] = g
	}
	for name, g := range want {
		got, err := s.Get(ctx, name)
		if err != nil {
			t.Errorf("Get(%q): %v", name, err)
		} else if d := Diff(got, g); d != "" {
			t.Errorf("Get(%q): %s", name, d)
		}
	}
	l, err := s.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := servers(l)
	wantNames := slices.Sorted(func(yield func(string) bool) {
		for n := range want {
			if !yield(n) {
				return
			}
		}
	})
	slices.Sort(got)
	if !slices.Equal(got, wantNames) {
		t.Errorf("List's servers = %q\nwant %q", got, wantNames)
	}
	// Deleting one name leaves the names that look like it.
	if err := s.Delete(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"a/b/c/", "github", "GitHub"} {
		if _, err := s.Get(ctx, other); err != nil {
			t.Errorf("Get(%q) after Delete(\"a/b/c\"): %v", other, err)
		}
	}
	for _, bad := range []string{"", "\xff\xfe", "ok\xc3"} {
		g := NewGrant(bad)
		if err := s.Put(ctx, g); err == nil {
			t.Errorf("Put(%q) succeeded; want a bad name refused", bad)
		}
		if _, err := s.Get(ctx, bad); err == nil {
			t.Errorf("Get(%q) succeeded; want a bad name refused", bad)
		}
	}
}

func testConcurrentPut(t *testing.T, s credstore.Store) {
	ctx := t.Context()
	const n = 24
	grants := make([]credstore.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		grants[i] = NewGrant(fmt.Sprintf("server-%02d", i))
		wg.Go(func() { errs[i] = s.Put(ctx, grants[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Put(%q): %v", grants[i].Server, err)
		}
	}
	l, err := s.List(ctx)
	if err != nil || len(l) != n {
		t.Fatalf("List after %d concurrent Puts = %d grants, %v; want %d", n, len(l), err, n)
	}
	for _, g := range grants {
		if got, err := s.Get(ctx, g.Server); err != nil || Diff(got, g) != "" {
			t.Errorf("Get(%q) = %v (%s)", g.Server, err, Diff(got, g))
		}
	}
}

func testReplaceIsWhole(t *testing.T, s credstore.Store) {
	ctx := t.Context()
	a, b := NewGrant("busy"), NewGrant("busy")
	if err := s.Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	const rounds = 40
	var wg sync.WaitGroup
	var putErr error
	wg.Go(func() {
		for i := range rounds {
			g := a
			if i%2 == 0 {
				g = b
			}
			if err := s.Put(ctx, g); err != nil {
				putErr = err
				return
			}
		}
	})
	for range rounds {
		got, err := s.Get(ctx, "busy")
		if err != nil {
			t.Errorf("Get during Puts: %v", err)
			break
		}
		if Diff(got, a) != "" && Diff(got, b) != "" {
			t.Errorf("Get during Puts returned neither grant: %s", Diff(got, a))
			break
		}
	}
	wg.Wait()
	if putErr != nil {
		t.Fatal(putErr)
	}
}

// testWithLock: while one goroutine holds the lock (through s1), another
// (through s2) is told to wait and enters only after the first let go,
// and sees what the first stored.
func testWithLock(t *testing.T, s1, s2 credstore.Store) {
	ctx := t.Context()
	g := NewGrant("locked")
	if err := s1.Put(ctx, g); err != nil {
		t.Fatal(err)
	}
	rotated := Canary("refresh-first")
	held, release := make(chan struct{}), make(chan struct{})
	var released atomic.Bool
	first := make(chan error, 1)
	go func() {
		first <- s1.WithLock(ctx, "locked", func(ctx context.Context) error {
			close(held)
			<-release
			return rotate(ctx, s1, "locked", rotated)
		})
	}()
	select {
	case <-held:
	case err := <-first:
		t.Fatalf("WithLock returned before its fn ran: %v", err)
	}
	waiting, entered := make(chan struct{}), make(chan struct{})
	var waits atomic.Int32
	var seen string
	second := make(chan error, 1)
	onWait(s2, func(server string) {
		if waits.Add(1) == 1 {
			close(waiting)
		}
		if server != "locked" {
			t.Errorf("LockWaiting got server %q, want %q", server, "locked")
		}
	})
	wctx := ctx
	go func() {
		second <- s2.WithLock(wctx, "locked", func(ctx context.Context) error {
			close(entered)
			if !released.Load() {
				return errors.New("entered while another goroutine held the lock")
			}
			got, err := s2.Get(ctx, "locked")
			if err == nil {
				seen = got.Token.RefreshToken
			}
			return err
		})
	}()
	select {
	case <-waiting:
	case <-entered:
		t.Error("the second WithLock ran its fn while the first held the lock")
	case err := <-second:
		t.Fatalf("the second WithLock returned while the first held the lock: %v", err)
	}
	released.Store(true)
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first WithLock: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second WithLock: %v", err)
	}
	if seen != rotated {
		t.Errorf("the second holder read refresh token %q, want %q, which the first stored", seen, rotated)
	}
	if n := waits.Load(); n != 1 {
		t.Errorf("LockWaiting was called %d times for one wait, want once", n)
	}
}

// rotate is a refresh: it reads server's grant and stores it with a new
// access token and the refresh token next.
func rotate(ctx context.Context, s credstore.Store, server, next string) error {
	g, err := s.Get(ctx, server)
	if err != nil {
		return err
	}
	g.Token = &oauth2.Token{AccessToken: Canary("access"), TokenType: "Bearer", RefreshToken: next, Expiry: time.Now().Add(time.Hour)}
	g.Refreshed = time.Now()
	return s.Put(ctx, g)
}

// testLockNested: a WithLock in fn's ctx runs at once; other servers'
// locks are free meanwhile.
func testLockNested(t *testing.T, s credstore.Store) {
	ran := false
	err := s.WithLock(t.Context(), "nested", func(ctx context.Context) error {
		if err := s.WithLock(ctx, "other", func(context.Context) error { return nil }); err != nil {
			return fmt.Errorf("another server's lock: %w", err)
		}
		return s.WithLock(ctx, "nested", func(context.Context) error {
			ran = true
			return nil
		})
	})
	if err != nil || !ran {
		t.Errorf("nested WithLock = %v, ran %v; want its fn run at once", err, ran)
	}
	want := errors.New("fn's own error")
	if err := s.WithLock(t.Context(), "nested", func(context.Context) error { return want }); !errors.Is(err, want) {
		t.Errorf("WithLock = %v, want fn's error", err)
	}
}

// testLockCancel: a WithLock whose ctx ends while it waits returns the
// ctx's error without running fn, and the lock is not left held.
func testLockCancel(t *testing.T, s credstore.Store) {
	held, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.WithLock(t.Context(), "cancel", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	onWait(s, func(string) { cancel() })
	ran := false
	err := s.WithLock(ctx, "cancel", func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Errorf("WithLock whose ctx ended while waiting = %v, ran %v; want context.Canceled, fn not run", err, ran)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := s.WithLock(t.Context(), "cancel", func(context.Context) error { return nil }); err != nil {
		t.Errorf("WithLock after a cancelled wait: %v", err)
	}
}

// HelperEnv is the environment variable that makes the test binary the
// suite's helper process. Its value is the helper's task, as JSON.
const HelperEnv = "MST_CREDSTORETEST_HELPER"

type task struct {
	Dir    string `json:"dir"`
	Server string `json:"server"`
	// Mode is "hold": take the lock, say "held", wait for a line on stdin,
	// rotate the grant to Next, say "leaving", let go; or "wait": say
	// "waiting" when told to wait, then rotate the grant to Next inside
	// the lock and say "in".
	Mode string `json:"mode"`
	Next string `json:"next"`
}

// Helper runs the helper process the suite starts, when this process is
// one, and exits; otherwise it returns at once. Call it first in
// TestMain, with the Open given to Run.
func Helper(open Open) {
	spec := os.Getenv(HelperEnv)
	if spec == "" {
		return
	}
	if err := helper(open, spec); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helper(open Open, spec string) error {
	var tk task
	if err := json.Unmarshal([]byte(spec), &tk); err != nil {
		return err
	}
	s, err := openHooked(open, tk.Dir)
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch tk.Mode {
	case "hold":
		return s.WithLock(ctx, tk.Server, func(ctx context.Context) error {
			fmt.Println("held")
			if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
				return fmt.Errorf("waiting to be told to let go: %w", err)
			}
			if err := rotate(ctx, s, tk.Server, tk.Next); err != nil {
				return err
			}
			fmt.Println("leaving")
			return nil
		})
	case "wait":
		onWait(s, func(string) { fmt.Println("waiting") })
		return s.WithLock(ctx, tk.Server, func(ctx context.Context) error {
			if err := rotate(ctx, s, tk.Server, tk.Next); err != nil {
				return err
			}
			fmt.Println("in")
			return nil
		})
	}
	return fmt.Errorf("unknown helper mode %q", tk.Mode)
}

// helperProc is a running helper process.
type helperProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan error
}

func startHelper(t *testing.T, tk task) *helperProc {
	t.Helper()
	spec, _ := json.Marshal(tk)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), HelperEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helperProc{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		h.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill() // an error once it has ended
	})
	return h
}

// next returns the helper's next line of output; it fails t when the
// helper ended instead.
func (h *helperProc) next(want string) {
	h.t.Helper()
	line, ok := <-h.lines
	if !ok {
		h.t.Fatalf("the helper process ended (%v) before saying %q; does TestMain call credstoretest.Helper?", <-h.done, want)
	}
	if line != want {
		h.t.Fatalf("the helper process said %q, want %q (does TestMain call credstoretest.Helper?)", line, want)
	}
}

func (h *helperProc) wait() {
	h.t.Helper()
	for line := range h.lines {
		h.t.Errorf("the helper process said %q, want nothing more", line)
	}
	if err := <-h.done; err != nil {
		h.t.Fatalf("the helper process: %v", err)
	}
}

// testHelperHolds: while another process holds the lock, WithLock here
// is told to wait and enters after the other let go, seeing the refresh
// token it stored.
func testHelperHolds(t *testing.T, s credstore.Store, dir string) {
	ctx := t.Context()
	if err := s.Put(ctx, NewGrant("shared")); err != nil {
		t.Fatal(err)
	}
	byHelper := Canary("refresh-helper")
	h := startHelper(t, task{Dir: dir, Server: "shared", Mode: "hold", Next: byHelper})
	h.next("held")
	var released atomic.Bool
	waiting, entered := make(chan struct{}), make(chan struct{})
	mine := Canary("refresh-here")
	var seen string
	result := make(chan error, 1)
	onWait(s, func(string) { close(waiting) })
	wctx := ctx
	go func() {
		result <- s.WithLock(wctx, "shared", func(ctx context.Context) error {
			close(entered)
			if !released.Load() {
				return errors.New("entered while the helper process held the lock")
			}
			g, err := s.Get(ctx, "shared")
			if err != nil {
				return err
			}
			seen = g.Token.RefreshToken
			return rotate(ctx, s, "shared", mine)
		})
	}()
	select {
	case <-waiting:
	case <-entered:
		t.Error("WithLock ran its fn while another process held the lock")
	case err := <-result:
		t.Fatalf("WithLock returned while another process held the lock: %v", err)
	}
	released.Store(true)
	io.WriteString(h.stdin, "let go\n")
	h.next("leaving")
	h.wait()
	if err := <-result; err != nil {
		t.Fatalf("WithLock: %v", err)
	}
	if seen != byHelper {
		t.Errorf("WithLock's fn read refresh token %q, want %q, which the helper process stored under the lock", seen, byHelper)
	}
	if g, err := s.Get(ctx, "shared"); err != nil || g.Token.RefreshToken != mine {
		t.Errorf("Get after both refreshes = %v; want the refresh token stored last", err)
	}
}

// testHelperWaits: while this process holds the lock, another process is
// told to wait and enters after this one let go.
func testHelperWaits(t *testing.T, s credstore.Store, dir string) {
	ctx := t.Context()
	if err := s.Put(ctx, NewGrant("other-way")); err != nil {
		t.Fatal(err)
	}
	mine, byHelper := Canary("refresh-here"), Canary("refresh-helper")
	var h *helperProc
	err := s.WithLock(ctx, "other-way", func(ctx context.Context) error {
		h = startHelper(t, task{Dir: dir, Server: "other-way", Mode: "wait", Next: byHelper})
		h.next("waiting")
		return rotate(ctx, s, "other-way", mine)
	})
	if err != nil {
		t.Fatalf("WithLock: %v", err)
	}
	h.next("in")
	h.wait()
	g, err := s.Get(ctx, "other-way")
	if err != nil || g.Token.RefreshToken != byHelper {
		t.Errorf("Get after both refreshes = %v; want the helper's refresh token, stored after ours", err)
	}
}

// testCancelWhileHelperHolds: a wait for a lock another process holds
// ends with the ctx, and leaves the lock free once that process lets go.
func testCancelWhileHelperHolds(t *testing.T, s credstore.Store, dir string) {
	if err := s.Put(t.Context(), NewGrant("cancelled")); err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, task{Dir: dir, Server: "cancelled", Mode: "hold", Next: Canary("refresh-helper")})
	h.next("held")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	onWait(s, func(string) { cancel() })
	ran := false
	err := s.WithLock(ctx, "cancelled", func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Errorf("WithLock whose ctx ended while another process held the lock = %v, ran %v; want context.Canceled, fn not run", err, ran)
	}
	io.WriteString(h.stdin, "let go\n")
	h.next("leaving")
	h.wait()
	if err := s.WithLock(t.Context(), "cancelled", func(context.Context) error { return nil }); err != nil {
		t.Errorf("WithLock after the other process let go: %v", err)
	}
}
