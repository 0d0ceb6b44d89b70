package credstore_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/testkit/oauthtest"
)

// browse is a LoginParams.Open that plays the browser: before approving
// it sends the callback an answer with a state of another authorization,
// which must be refused and must not end the wait.
func browse(t *testing.T) func(string) error {
	return func(authURL string) error {
		u, err := url.Parse(authURL)
		if err != nil {
			return err
		}
		redirect, err := url.Parse(u.Query().Get("redirect_uri"))
		if err != nil {
			return err
		}
		redirect.RawQuery = url.Values{"code": {"forged"}, "state": {"another"}}.Encode()
		resp, err := http.Get(redirect.String())
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("the callback answered an answer with the wrong state with %s, want 400", resp.Status)
		}
		return oauthtest.Browse(t.Context(), authURL)
	}
}

// checkGrant checks what every Login gives, and that the token and the
// refresh token work.
func checkGrant(t *testing.T, s *oauthtest.Server, res credstore.LoginResult, out string) {
	t.Helper()
	g := res.Grant
	if g.Server != "notes" || g.Resource != s.MCPURL() || g.TokenEndpoint != s.TokenURL() || g.Issuer != s.Issuer() {
		t.Errorf("grant names server %q, resource %q, token endpoint %q, issuer %q; want notes, %s, %s, %s",
			g.Server, g.Resource, g.TokenEndpoint, g.Issuer, s.MCPURL(), s.TokenURL(), s.Issuer())
	}
	if g.Token == nil || g.Token.AccessToken == "" || g.Token.RefreshToken == "" || g.Token.Expiry.IsZero() {
		t.Fatalf("grant token = %+v, want an access token, a refresh token and an expiry", g.Token)
	}
	if g.Granted.IsZero() || !g.Refreshed.IsZero() || g.Listed != nil {
		t.Errorf("granted %v, refreshed %v, listed %v", g.Granted, g.Refreshed, g.Listed)
	}
	if !slices.Contains(g.Scopes, oauthtest.Scope) {
		t.Errorf("scopes = %v, want %s among them", g.Scopes, oauthtest.Scope)
	}
	if res.Tools != 2 {
		t.Errorf("%d tools, want 2", res.Tools)
	}
	if err := g.Check(); err != nil {
		t.Errorf("the grant cannot be stored: %v", err)
	}
	if _, err := s.Echo(t.Context(), g.Token.AccessToken, "hi"); err != nil {
		t.Errorf("the access token does not work: %v", err)
	}
	cfg := oauth2.Config{ClientID: g.ClientID, ClientSecret: g.ClientSecret, Endpoint: oauth2.Endpoint{TokenURL: g.TokenEndpoint}}
	if _, err := cfg.TokenSource(t.Context(), &oauth2.Token{RefreshToken: g.Token.RefreshToken}).Token(); err != nil {
		t.Errorf("refreshing the grant: %v", err)
	}
	for name, v := range map[string]string{"access token": g.Token.AccessToken, "refresh token": g.Token.RefreshToken, "client secret": g.ClientSecret} {
		if v != "" && strings.Contains(out, v) {
			t.Errorf("Login printed the %s", name)
		}
	}
}

func TestLoginPreregistered(t *testing.T) {
	for _, confidential := range []bool{true, false} {
		t.Run(map[bool]string{true: "confidential", false: "public"}[confidential], func(t *testing.T) {
			s := oauthtest.Start(t)
			var out syncBuffer
			p := credstore.LoginParams{Server: "notes", URL: s.MCPURL(), ClientID: s.ClientID(), Out: &out, Open: browse(t)}
			if confidential {
				p.ClientSecret = s.ClientSecret()
			}
			res, err := credstore.Login(t.Context(), p)
			if !confidential {
				// mockoidc's client is confidential: the exchange without
				// its secret is refused, and the error says so.
				if err == nil || !strings.Contains(err.Error(), "notes") {
					t.Fatalf("Login without the client secret = %v, want an error naming the server", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkGrant(t, s, res, out.String())
			if res.Grant.ClientID != s.ClientID() || res.Grant.ClientSecret != s.ClientSecret() || res.Registered {
				t.Errorf("client %q (registered %t), want the preregistered one", res.Grant.ClientID, res.Registered)
			}
			if c := s.Counts(); c.Registrations != 0 || c.Exchanges != 1 {
				t.Errorf("counts = %+v, want one exchange and no registration", c)
			}
			if !strings.Contains(out.String(), s.AuthURL()+"?") || !strings.Contains(out.String(), "open this URL") {
				t.Errorf("Login did not print the URL to open:\n%s", out.String())
			}
		})
	}
}

func TestLoginDynamicRegistration(t *testing.T) {
	s := oauthtest.Start(t)
	var out syncBuffer
	scopes := []string{oauthtest.Scope, "profile"}
	res, err := credstore.Login(t.Context(), credstore.LoginParams{Server: "notes", URL: s.MCPURL(), Scopes: scopes, Out: &out, Open: browse(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkGrant(t, s, res, out.String())
	regs := s.Registrations()
	if len(regs) != 1 {
		t.Fatalf("%d registrations, want 1", len(regs))
	}
	r := regs[0]
	if res.Grant.ClientID != r.ClientID || res.Grant.ClientSecret == "" || !res.Registered {
		t.Errorf("grant client %q (secret set %t, registered %t), want the registered client %q", res.Grant.ClientID, res.Grant.ClientSecret != "", res.Registered, r.ClientID)
	}
	if !slices.Equal(r.GrantTypes, []string{"authorization_code", "refresh_token"}) {
		t.Errorf("registered grant types %v", r.GrantTypes)
	}
	if len(r.RedirectURIs) != 1 || !strings.HasPrefix(r.RedirectURIs[0], "http://127.0.0.1:") || !strings.HasSuffix(r.RedirectURIs[0], credstore.CallbackPath) {
		t.Errorf("registered redirect URIs %v, want the loopback callback", r.RedirectURIs)
	}
	if r.ClientName != "mst" {
		t.Errorf("client name %q", r.ClientName)
	}
	for _, sc := range scopes {
		if !slices.Contains(res.Grant.Scopes, sc) {
			t.Errorf("grant scopes %v, want %v among them", res.Grant.Scopes, scopes)
		}
	}
}

// pasteUser reads Login's output for the URL to open, approves it, and
// pastes first the lines in bad and then what good makes of the redirect.
func pasteUser(t *testing.T, outR io.Reader, paste io.Writer, bad []string, good func(loc *url.URL) string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sc := bufio.NewScanner(outR)
	found := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if found || !strings.HasPrefix(line, "http") {
			continue
		}
		found = true
		// Login prints about the bad lines while they are pasted: paste
		// beside the reading.
		wg.Go(func() {
			loc, err := oauthtest.Approve(t.Context(), line)
			if err != nil {
				t.Errorf("approving: %v", err)
				return
			}
			for _, b := range bad {
				io.WriteString(paste, b+"\n")
			}
			io.WriteString(paste, good(loc)+"\n")
		})
	}
}

func TestLoginPaste(t *testing.T) {
	// Lines a user might paste that carry no usable answer: Login says
	// so and waits on.
	bad := []string{
		"",
		"http://127.0.0.1:1/callback?code=abc&state=another",
		"http://127.0.0.1:1/callback",
		"not a code at all",
	}
	for name, good := range map[string]func(*url.URL) string{
		"full address":   func(loc *url.URL) string { return loc.String() },
		"query":          func(loc *url.URL) string { return "?" + loc.RawQuery },
		"bare code":      func(loc *url.URL) string { return loc.Query().Get("code") },
		"padded address": func(loc *url.URL) string { return "  " + loc.String() + "\t" },
	} {
		t.Run(name, func(t *testing.T) {
			s := oauthtest.Start(t)
			outR, outW := io.Pipe()
			pasteR, pasteW := io.Pipe()
			t.Cleanup(func() { pasteW.Close(); outR.Close() })
			var printed syncBuffer
			done := make(chan struct{})
			go func() {
				defer close(done)
				pasteUser(t, io.TeeReader(outR, &printed), pasteW, bad, good)
			}()
			res, err := credstore.Login(t.Context(), credstore.LoginParams{
				Server: "notes", URL: s.MCPURL(), ClientID: s.ClientID(), ClientSecret: s.ClientSecret(),
				Port: 0, Out: outW, Paste: pasteR,
			})
			outW.Close()
			<-done
			if err != nil {
				t.Fatalf("%v\noutput:\n%s", err, printed.String())
			}
			checkGrant(t, s, res, printed.String())
			out := printed.String()
			for _, want := range []string{"paste it here", "answers another authorization", "carries no code", "neither an address nor a code"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestLoginDenied(t *testing.T) {
	t.Run("callback", func(t *testing.T) {
		s := oauthtest.Start(t)
		s.DenyNext(1)
		_, err := credstore.Login(t.Context(), credstore.LoginParams{Server: "notes", URL: s.MCPURL(), ClientID: s.ClientID(), ClientSecret: s.ClientSecret(), Open: browse(t)})
		checkDenied(t, s, err)
	})
	t.Run("paste", func(t *testing.T) {
		s := oauthtest.Start(t)
		s.DenyNext(1)
		outR, outW := io.Pipe()
		pasteR, pasteW := io.Pipe()
		t.Cleanup(func() { pasteW.Close(); outR.Close() })
		done := make(chan struct{})
		go func() {
			defer close(done)
			pasteUser(t, outR, pasteW, nil, func(loc *url.URL) string { return loc.String() })
		}()
		_, err := credstore.Login(t.Context(), credstore.LoginParams{Server: "notes", URL: s.MCPURL(), ClientID: s.ClientID(), ClientSecret: s.ClientSecret(), Out: outW, Paste: pasteR})
		outW.Close()
		<-done
		checkDenied(t, s, err)
	})
}

func checkDenied(t *testing.T, s *oauthtest.Server, err error) {
	t.Helper()
	var ae *credstore.AuthorizationError
	if !errors.As(err, &ae) || ae.Code != "access_denied" || ae.Server != "notes" {
		t.Fatalf("Login = %v, want an AuthorizationError access_denied for notes", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"notes"`) || !strings.Contains(msg, "access_denied") || !strings.Contains(msg, "the user declined") {
		t.Errorf("error %q does not name the server, the code and the description", msg)
	}
	if c := s.Counts(); c.Exchanges != 0 {
		t.Errorf("counts = %+v, want no exchange", c)
	}
}

// Login ends when its ctx does, the wait for the browser too.
func TestLoginCancelled(t *testing.T) {
	s := oauthtest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	_, err := credstore.Login(ctx, credstore.LoginParams{Server: "notes", URL: s.MCPURL(), ClientID: s.ClientID(), ClientSecret: s.ClientSecret(),
		Open: func(string) error { cancel(); return nil }})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Login = %v, want context.Canceled", err)
	}
}

// A server with no OAuth, or none at all, gives an error naming it.
func TestLoginNotConnector(t *testing.T) {
	_, err := credstore.Login(t.Context(), credstore.LoginParams{Server: "gone", URL: "http://127.0.0.1:1/mcp", ClientID: "x"})
	if err == nil || !strings.Contains(err.Error(), `"gone"`) {
		t.Errorf("Login to nothing = %v, want an error naming the server", err)
	}
}
