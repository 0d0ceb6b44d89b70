package credstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/mst-eval/mst/servers"
	"golang.org/x/oauth2"
)

// CallbackPath is the path of the loopback redirect URI Login listens at:
// http://127.0.0.1:PORT/callback.
const CallbackPath = "/callback"

// LoginParams is what Login authorises and how it talks to the user.
type LoginParams struct {
	// Server is the connector server's name in the eval config; URL its
	// streamable HTTP endpoint, the resource the grant is for.
	Server, URL string
	// Headers are sent on every request to the MCP server (a static API
	// key a server wants besides its OAuth token), values resolved.
	Headers map[string]string
	// Scopes to ask for; none asks for those the server's metadata names.
	Scopes []string
	// ClientID is a client registered beforehand with the authorization
	// server, ClientSecret its secret (confidential clients only). With no
	// ClientID, Login registers a client dynamically, which the
	// authorization server must offer.
	ClientID, ClientSecret string
	// ClientName is the name a dynamically registered client gets, shown
	// on the consent screen; "" is "mst".
	ClientName string
	// Port is the loopback port of the redirect URI; 0 takes any free one.
	Port int
	// Open, if set, opens the authorization URL in a browser. When it
	// fails, Login says so and the user opens the URL by hand.
	Open func(url string) error
	// Out gets the messages for the user: the URL to open and what Login
	// waits for. It never gets a token or secret. nil discards them.
	Out io.Writer
	// Paste, if set, is read line by line while Login waits, for a user
	// whose browser cannot reach the loopback address (another machine):
	// a line is the address the browser ended at, or the bare code.
	Paste io.Reader
	// HTTPClient makes the metadata, registration and token requests and
	// the MCP requests; nil is http.DefaultClient.
	HTTPClient *http.Client
}

// LoginResult is what Login obtained.
type LoginResult struct {
	// Grant is ready to Put: every field set that Login could learn
	// (Issuer is empty when the metadata could not be read again).
	Grant Grant
	// Registered says the client was registered dynamically.
	Registered bool
	// Tools is how many tools the server listed with the new token.
	Tools int
}

// AuthorizationError is an authorization server's refusal sent back to
// the redirect URI (RFC 6749 section 4.1.2.1), such as access_denied.
type AuthorizationError struct {
	Server string
	// Code is the OAuth error code; Description and URI what the server
	// added, if anything.
	Code, Description, URI string
}

func (e *AuthorizationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the authorization server of server %q refused the authorization: %s", e.Server, e.Code)
	if e.Description != "" {
		fmt.Fprintf(&b, " (%s)", e.Description)
	}
	if e.URI != "" {
		fmt.Fprintf(&b, ", see %s", e.URI)
	}
	switch e.Code {
	case "access_denied":
		b.WriteString("; the access was declined on the consent page or by the provider's policy: try again and approve it, or ask the provider's administrator to allow this client")
	case "invalid_scope":
		b.WriteString("; set oauth.scopes in the eval config to scopes the server grants")
	case "unauthorized_client", "invalid_client":
		b.WriteString("; check oauth.clientId in the eval config, and that http://127.0.0.1 is a redirect URI of that client")
	}
	return b.String()
}

// answer is one way the authorization came back: the loopback callback or
// a pasted line.
type answer struct {
	res *auth.AuthorizationResult
	err error
}

// Login authorises one connector server: it runs MCP's authorization
// flow through the MCP SDK's AuthorizationCodeHandler (protected resource
// metadata, authorization server metadata, the preregistered client or
// dynamic client registration, the authorization code with PKCE) with the
// redirect to a loopback listener on 127.0.0.1, and then lists the
// server's tools with the new token to show it works. The user approves
// in a browser: Login prints the URL to p.Out, calls p.Open, and takes
// whichever comes first of the redirect to the loopback and a line on
// p.Paste. It stores nothing; the caller Puts the grant.
func Login(ctx context.Context, p LoginParams) (LoginResult, error) {
	if err := CheckServer(p.Server); err != nil {
		return LoginResult{}, err
	}
	if p.URL == "" {
		return LoginResult{}, fmt.Errorf("server %q has no url: a connector server is a streamable HTTP server", p.Server)
	}
	if p.ClientSecret != "" && p.ClientID == "" {
		return LoginResult{}, fmt.Errorf("server %q has a client secret but no client ID: set oauth.clientId too", p.Server)
	}
	out := p.Out
	if out == nil {
		out = io.Discard
	}
	hc := p.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.Port))
	if err != nil {
		return LoginResult{}, fmt.Errorf("listening on 127.0.0.1 for the authorization server's redirect: %w; choose another port (0 takes any free one)", err)
	}
	redirect := fmt.Sprintf("http://%s%s", ln.Addr(), CallbackPath)
	fl := &flow{server: p.Server, preregistered: p.ClientID != "", answers: make(chan answer, 1)}
	srv := &http.Server{Handler: fl, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	if p.Paste != nil {
		go fl.readPaste(ctx, p.Paste, out)
	}

	// What the handler ends with: the client, endpoints and token.
	var (
		mu   sync.Mutex
		cfg  *oauth2.Config
		tok0 *oauth2.Token
	)
	hcfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:           redirect,
		RequestRefreshToken:   true,
		AcceptUnadvertisedIss: true,
		Client:                hc,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return fl.fetch(ctx, args.URL, redirect, p, out)
		},
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			mu.Lock()
			cfg, tok0 = c, t
			mu.Unlock()
			return c.TokenSource(ctx, t), nil
		},
	}
	if len(p.Scopes) > 0 {
		scopes := slices.Clone(p.Scopes)
		hcfg.ScopeFilter = func([]string) []string { return slices.Clone(scopes) }
	}
	if p.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: p.ClientID}
		if p.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: p.ClientSecret}
		}
		hcfg.PreregisteredClient = pre
	} else {
		name := p.ClientName
		if name == "" {
			name = "mst"
		}
		hcfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:  []string{redirect},
			GrantTypes:    []string{"authorization_code", "refresh_token"},
			ResponseTypes: []string{"code"},
			ClientName:    name,
			Scope:         strings.Join(p.Scopes, " "),
		}}
	}
	h, err := auth.NewAuthorizationCodeHandler(hcfg)
	if err != nil {
		return LoginResult{}, fmt.Errorf("authorising server %q: %w", p.Server, err)
	}

	mcpHTTP := hc
	if len(p.Headers) > 0 {
		rt := hc.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		c := *hc
		c.Transport = servers.WithHeaders(rt, p.Headers)
		mcpHTTP = &c
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mst", Version: "auth"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: p.URL, HTTPClient: mcpHTTP, OAuthHandler: h, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return LoginResult{}, fl.explain(ctx, err, p.URL)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return LoginResult{}, fmt.Errorf("server %q accepted the new token but listing its tools failed: %w", p.Server, fl.explain(ctx, err, p.URL))
	}

	mu.Lock()
	c, tok := cfg, tok0
	mu.Unlock()
	if c == nil || tok == nil {
		return LoginResult{}, fmt.Errorf("server %q at %s let mst in without asking for authorization: it is not a connector server; remove its oauth block from the eval config", p.Server, p.URL)
	}
	// The handler's source holds the newest token, should it have been
	// refreshed since the exchange.
	if ts, err := h.TokenSource(ctx); err == nil && ts != nil {
		if t, err := ts.Token(); err == nil {
			tok = t
		}
	}
	scopes := slices.Clone(c.Scopes)
	if s, ok := tok.Extra("scope").(string); ok && strings.TrimSpace(s) != "" {
		scopes = strings.Fields(s)
	}
	g := Grant{
		Server:        p.Server,
		Resource:      p.URL,
		Issuer:        issuerOf(ctx, hc, p.URL, c.Endpoint.TokenURL),
		TokenEndpoint: c.Endpoint.TokenURL,
		ClientID:      c.ClientID,
		ClientSecret:  c.ClientSecret,
		Scopes:        scopes,
		Token:         &oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry},
		Granted:       time.Now().UTC(),
	}
	return LoginResult{Grant: g, Registered: p.ClientID == "", Tools: len(tools.Tools)}, nil
}

// issuerOf reads the resource's metadata again for the issuer of the
// authorization server whose token endpoint is tokenURL; "" when that
// fails. (The SDK's handler does not say which it used.)
func issuerOf(ctx context.Context, hc *http.Client, resource, tokenURL string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	type candidate struct{ meta, resource string }
	at, root := *u, *u
	at.Path, at.RawQuery, at.Fragment = "/.well-known/oauth-protected-resource/"+strings.TrimLeft(u.Path, "/"), "", ""
	root.Path, root.RawQuery, root.Fragment = "/.well-known/oauth-protected-resource", "", ""
	base := *u
	base.Path, base.RawQuery, base.Fragment = "", "", ""
	for _, c := range []candidate{{at.String(), resource}, {root.String(), base.String()}} {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.meta, c.resource, hc)
		if err != nil || prm == nil {
			continue
		}
		for _, as := range prm.AuthorizationServers {
			if asm, err := auth.GetAuthServerMetadata(ctx, as, hc); err == nil && asm != nil && asm.TokenEndpoint == tokenURL {
				return asm.Issuer
			}
		}
	}
	return ""
}

// flow is one Login's wait for the authorization response: the loopback
// callback handler and the pasted lines feed answers.
type flow struct {
	server        string
	preregistered bool
	answers       chan answer

	mu    sync.Mutex
	state string // of the authorization URL being waited for; "" before
	// authErr is the first refusal delivered, for explain.
	authErr error
}

// deliver hands a an answer to the fetch waiting, unless one came first.
func (f *flow) deliver(a answer) {
	if a.err != nil {
		f.mu.Lock()
		if f.authErr == nil {
			f.authErr = a.err
		}
		f.mu.Unlock()
	}
	select {
	case f.answers <- a:
	default:
	}
}

func (f *flow) expected() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

// fetch is the handler's AuthorizationCodeFetcher.
func (f *flow) fetch(ctx context.Context, authURL, redirect string, p LoginParams, out io.Writer) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, fmt.Errorf("the authorization URL for server %q does not parse: %w", f.server, err)
	}
	f.mu.Lock()
	failed := f.authErr
	f.state = u.Query().Get("state")
	f.mu.Unlock()
	// The SDK's client may ask again after a refusal (its first request
	// and a fallback); the refusal stands.
	if failed != nil {
		return nil, failed
	}
	// Drain an answer left from an earlier round (a step-up).
	select {
	case <-f.answers:
	default:
	}

	fmt.Fprintf(out, "To authorise server %q, open this URL in a browser and approve the access:\n\n  %s\n\n", f.server, authURL)
	if p.Open != nil {
		if err := p.Open(authURL); err != nil {
			fmt.Fprintf(out, "Could not open a browser (%v); open the URL yourself.\n", err)
		} else {
			fmt.Fprintln(out, "A browser was opened at that URL.")
		}
	}
	fmt.Fprintf(out, "Waiting for the browser to come back to %s ...\n", redirect)
	if p.Paste != nil {
		fmt.Fprintln(out, "If the browser runs on another machine and ends on a page that does not load, copy that\npage's address (or the code it shows), paste it here and press Enter.")
	}

	select {
	case a := <-f.answers:
		if a.err != nil {
			return nil, a.err
		}
		return a.res, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the authorization of server %q: %w", f.server, ctx.Err())
	}
}

// explain words the error of connecting or listing tools: a refusal the
// authorization server sent back is returned as it is.
func (f *flow) explain(ctx context.Context, err error, endpoint string) error {
	if ctx.Err() != nil {
		// The login was cancelled: the SDK's error may say so only in
		// words, so the context's own error is what it wraps.
		return fmt.Errorf("authorising server %q at %s: %w (%v)", f.server, endpoint, ctx.Err(), err)
	}
	f.mu.Lock()
	ae := f.authErr
	f.mu.Unlock()
	if ae != nil {
		return ae
	}
	if !f.preregistered && (strings.Contains(err.Error(), "client registration") || strings.Contains(err.Error(), "register client")) {
		return fmt.Errorf("authorising server %q at %s: %w; if its authorization server offers no dynamic client registration, register a client there (redirect URI http://127.0.0.1) and set oauth.clientId (and oauth.clientSecret) in the eval config", f.server, endpoint, err)
	}
	return fmt.Errorf("authorising server %q at %s: %w", f.server, endpoint, err)
}

// ServeHTTP is the loopback callback.
func (f *flow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != CallbackPath {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	want := f.expected()
	if want == "" || q.Get("state") != want {
		page(w, http.StatusBadRequest, "Not the answer mst is waiting for",
			"This address does not carry the answer to the authorization mst is waiting for (its state does not match). Open the URL mst printed last.")
		return
	}
	if code := q.Get("error"); code != "" {
		ae := &AuthorizationError{Server: f.server, Code: code, Description: q.Get("error_description"), URI: q.Get("error_uri")}
		f.deliver(answer{err: ae})
		page(w, http.StatusOK, "Authorization refused",
			fmt.Sprintf("The authorization server refused access to %q: %s. mst says more in the terminal. You can close this tab.", f.server, code))
		return
	}
	if q.Get("code") == "" {
		page(w, http.StatusBadRequest, "No code", "This address carries no authorization code. Open the URL mst printed again.")
		return
	}
	f.deliver(answer{res: &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}})
	page(w, http.StatusOK, "Authorised",
		fmt.Sprintf("mst got the authorization for %q and is finishing in the terminal. You can close this tab.", f.server))
}

func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>mst: %s</title></head>\n<body style=\"font-family: sans-serif; max-width: 40em; margin: 4em auto\"><h1>%s</h1><p>%s</p></body></html>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}

// readPaste reads pasted lines until r ends or ctx ends, handing each
// answer to the fetch waiting. A line it cannot use gets a message on out.
func (f *flow) readPaste(ctx context.Context, r io.Reader, out io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		if ctx.Err() != nil {
			return
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		state := f.expected()
		if state == "" {
			fmt.Fprintln(out, "mst has no authorization URL out yet; wait for it, then paste the address the browser ends at.")
			continue
		}
		res, err := parsePaste(line, state, f.server)
		var ae *AuthorizationError
		switch {
		case errors.As(err, &ae):
			f.deliver(answer{err: err})
		case err != nil:
			fmt.Fprintf(out, "%v\n", err)
		default:
			f.deliver(answer{res: res})
		}
	}
}

// parsePaste reads a pasted line: the full address the browser was sent
// to (code, state and iss taken from it), its query alone, or the bare
// code (then state is the authorization URL's).
func parsePaste(line, state, server string) (*auth.AuthorizationResult, error) {
	query := ""
	switch {
	case strings.Contains(line, "://"):
		u, err := url.Parse(line)
		if err != nil {
			return nil, errors.New("that line does not parse as an address: paste the whole address from the browser's address bar, or just the code")
		}
		query = u.RawQuery
	case strings.Contains(line, "code=") || strings.Contains(line, "error="):
		query = strings.TrimPrefix(line, "?")
	}
	if query == "" && strings.Contains(line, "://") {
		return nil, errors.New("that address carries no code: paste the address the browser ended at after you approved, with its ?code=… part")
	}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, errors.New("the address's query does not parse: paste the address whole")
		}
		if got := q.Get("state"); got != "" && got != state {
			return nil, errors.New("that address answers another authorization (its state does not match): open the URL mst printed last and paste where it ends")
		}
		if code := q.Get("error"); code != "" {
			return nil, &AuthorizationError{Server: server, Code: code, Description: q.Get("error_description"), URI: q.Get("error_uri")}
		}
		if q.Get("code") == "" {
			return nil, errors.New("that address carries no code: paste the address the browser ended at after you approved, with its ?code=… part")
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: state, Iss: q.Get("iss")}, nil
	}
	if strings.ContainsAny(line, " \t") {
		return nil, errors.New("that line is neither an address nor a code: paste the address the browser ended at, or the code alone")
	}
	return &auth.AuthorizationResult{Code: line, State: state}, nil
}
