package credstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// DefaultMargin is how close to its expiry an access token is refreshed
// before Tokens hands it out.
const DefaultMargin = 2 * time.Minute

// Tokens hands out current access tokens of connector servers from the
// grants in a Store, refreshing a grant's token through its token
// endpoint when it is about to expire. A refresh runs inside
// Store.WithLock and reads the grant again there, so of two processes
// (or goroutines) that find the same token expiring, one refreshes and
// the other gets what it stored. The refreshed token is stored at once,
// so a rotated refresh token is never lost.
//
// No token value or client secret appears in its errors or log lines.
// Its methods may be called from many goroutines at once.
type Tokens struct {
	Store Store
	// Eval is the eval config's path as the user gave it with -c, for
	// the `mst auth` commands errors suggest; "" writes EVAL.
	Eval string
	// Margin is how long before its expiry a token is refreshed; 0 is
	// DefaultMargin.
	Margin time.Duration
	// HTTPClient makes the token requests; nil is http.DefaultClient.
	HTTPClient *http.Client
	// Logger gets a line for each refresh; nil discards.
	Logger *slog.Logger
}

// ErrGrantRefused is wrapped by the error of Tokens.Token when the
// authorization server refused the grant (OAuth's invalid_grant: the
// refresh token was revoked, has expired, or was replaced elsewhere).
// Only running `mst auth SERVER` again mends it.
var ErrGrantRefused = errors.New("the authorization server refused the grant")

// ErrNoRefresh is wrapped by the error of Tokens.Token when the access
// token has expired and the grant has no way to get another: no refresh
// token, or no token endpoint.
var ErrNoRefresh = errors.New("the grant cannot be refreshed")

// RefreshError is a refresh that failed other than by the grant being
// refused: the token endpoint could not be reached, or answered with an
// error. Its text names the server and the endpoint and holds no token
// value.
type RefreshError struct {
	Server, TokenEndpoint string
	// Status is the HTTP status of the answer, 0 when there was none.
	Status int
	// Code and Description are the OAuth error of the answer, if any;
	// Description has the grant's secret values taken out.
	Code, Description string
	// err is what failed when no answer came (a network error, ctx).
	err error
}

func (e *RefreshError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refreshing the access token of server %q at %s failed: ", e.Server, e.TokenEndpoint)
	switch {
	case e.err != nil:
		b.WriteString(e.err.Error())
	default:
		fmt.Fprintf(&b, "the server answered %d %s", e.Status, http.StatusText(e.Status))
		if e.Code != "" {
			fmt.Fprintf(&b, ": %s", e.Code)
		}
		if e.Description != "" {
			fmt.Fprintf(&b, " (%s)", e.Description)
		}
	}
	return b.String()
}

// Unwrap returns what failed when no answer came, such as ctx's error.
func (e *RefreshError) Unwrap() error { return e.err }

func (t *Tokens) margin() time.Duration {
	if t.Margin > 0 {
		return t.Margin
	}
	return DefaultMargin
}

func (t *Tokens) logger() *slog.Logger {
	if t.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Logger
}

// authCommand is the `mst auth` command that authorises server again.
func (t *Tokens) authCommand(server string) string {
	eval := "EVAL"
	if t.Eval != "" {
		eval = shellQuote(t.Eval)
	}
	return fmt.Sprintf("mst auth %s -c %s", shellQuote(server), eval)
}

// fresh reports whether g's access token is good for longer than the
// margin (a token without an expiry is good for ever).
func (t *Tokens) fresh(g Grant, now time.Time) bool {
	return g.Token != nil && g.Token.AccessToken != "" &&
		(g.Token.Expiry.IsZero() || g.Token.Expiry.After(now.Add(t.margin())))
}

// Token returns a current access token for server and when it expires
// (the zero time: never), refreshing the grant first when its token
// expires within the margin.
func (t *Tokens) Token(ctx context.Context, server string) (access string, expires time.Time, err error) {
	return t.token(ctx, server, "")
}

// Replace returns a current access token for server other than rejected,
// a value the server refused before its expiry (revoked on its side, or
// a clock ahead of this one): the grant is refreshed unless the store
// already holds another token.
func (t *Tokens) Replace(ctx context.Context, server, rejected string) (access string, expires time.Time, err error) {
	return t.token(ctx, server, rejected)
}

func (t *Tokens) token(ctx context.Context, server, rejected string) (access string, expires time.Time, err error) {
	g, err := t.get(ctx, server)
	if err != nil {
		return "", time.Time{}, err
	}
	usable := func(g Grant) bool {
		return t.fresh(g, time.Now()) && (rejected == "" || g.Token.AccessToken != rejected)
	}
	if usable(g) {
		return g.Token.AccessToken, g.Token.Expiry, nil
	}
	err = t.Store.WithLock(ctx, server, func(ctx context.Context) error {
		// Another process may have refreshed it meanwhile.
		g, err := t.get(ctx, server)
		if err != nil {
			return err
		}
		if usable(g) {
			access, expires = g.Token.AccessToken, g.Token.Expiry
			return nil
		}
		tok, err := t.refresh(ctx, g)
		if err != nil {
			return err
		}
		rotated := tok.RefreshToken != g.Token.RefreshToken
		g.Token = &oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
		g.Refreshed = time.Now()
		if err := t.Store.Put(ctx, g); err != nil {
			if rotated {
				// The old refresh token is dead and the new one was
				// not kept: after this run the grant is gone.
				return fmt.Errorf("the authorization server replaced server %q's refresh token, and storing the new one failed, so the grant is lost: %w; run `%s` to authorise it again", server, err, t.authCommand(server))
			}
			t.logger().Warn("storing a refreshed access token failed; the grant is unchanged and is refreshed again next time", "server", server, "err", err)
		}
		t.logger().Info("refreshed an access token", "server", server, "expires", tok.Expiry, "rotated", rotated)
		access, expires = tok.AccessToken, tok.Expiry
		return nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return access, expires, nil
}

// get reads server's grant, with an error that says what to run when
// there is none.
func (t *Tokens) get(ctx context.Context, server string) (Grant, error) {
	g, err := t.Store.Get(ctx, server)
	if errors.Is(err, ErrNotFound) {
		return Grant{}, fmt.Errorf("connector server %q has no grant in the credential store; authorise it with `%s`: %w", server, t.authCommand(server), ErrNotFound)
	}
	if err != nil {
		return Grant{}, err
	}
	return g, nil
}

// refresh asks g's token endpoint for a new token.
func (t *Tokens) refresh(ctx context.Context, g Grant) (*oauth2.Token, error) {
	if g.Token == nil || g.Token.RefreshToken == "" || g.TokenEndpoint == "" {
		what := "no refresh token"
		if g.Token != nil && g.Token.RefreshToken != "" {
			what = "no token endpoint"
		}
		return nil, fmt.Errorf("the access token of server %q has expired and its grant has %s to get another; run `%s` to authorise it again: %w", g.Server, what, t.authCommand(g.Server), ErrNoRefresh)
	}
	cfg := &oauth2.Config{
		ClientID:     g.ClientID,
		ClientSecret: g.ClientSecret,
		// The SDK's preference (OAuth 2.1), which works for public
		// clients too; one request, where auto-detection may send two.
		Endpoint: oauth2.Endpoint{TokenURL: g.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
	}
	if t.HTTPClient != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, t.HTTPClient)
	}
	// A token with only the refresh token is invalid, so the source
	// refreshes whatever the expiry says.
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: g.Token.RefreshToken}).Token()
	if err == nil && tok.AccessToken == "" {
		err = errors.New("the answer holds no access token")
	}
	if err == nil {
		return tok, nil
	}
	secrets := []string{g.Token.AccessToken, g.Token.RefreshToken, g.ClientSecret}
	if tok != nil {
		secrets = append(secrets, tok.AccessToken, tok.RefreshToken)
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode == "invalid_grant" {
			return nil, fmt.Errorf("the authorization server at %s refused the grant of server %q (invalid_grant: revoked, expired, or replaced by another authorisation); run `%s` to authorise it again: %w", g.TokenEndpoint, g.Server, t.authCommand(g.Server), ErrGrantRefused)
		}
		e := &RefreshError{Server: g.Server, TokenEndpoint: g.TokenEndpoint, Code: redact(re.ErrorCode, secrets), Description: redact(re.ErrorDescription, secrets)}
		if re.Response != nil {
			e.Status = re.Response.StatusCode
		}
		return nil, e
	}
	// Not an answer: a network error, ctx, or an answer that is not a
	// token. Its text is kept (redacted); ctx's error stays reachable.
	e := &RefreshError{Server: g.Server, TokenEndpoint: g.TokenEndpoint, err: redactedError{redact(err.Error(), secrets), err}}
	return nil, e
}

// redactedError is err with another text.
type redactedError struct {
	text string
	err  error
}

func (e redactedError) Error() string { return e.text }

// Unwrap gives ctx's errors only, whose text holds nothing of the
// request; anything else could print what was taken out.
func (e redactedError) Unwrap() error {
	switch {
	case errors.Is(e.err, context.Canceled):
		return context.Canceled
	case errors.Is(e.err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	}
	return nil
}

// redact replaces each non-empty secret in s.
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
