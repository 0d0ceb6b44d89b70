// Package oauthtest runs, inside a test, an OAuth 2 authorization server
// and an MCP server that only answers requests with its access tokens: the
// two ends of a connector server, for tests of `mst auth`, of credential
// stores and of tokens handed to workers.
//
// The authorization server is github.com/oauth2-proxy/mockoidc, which does
// the protocol work: discovery (at ISSUER/.well-known/openid-configuration,
// the OIDC form the MCP SDK tries), the authorization code flow with PKCE
// and a preregistered confidential client, signed tokens, refresh. A
// handler in front of its endpoints adds what it lacks and what tests need:
//
//   - PKCE with S256 is required at the authorization endpoint;
//   - tokens are opaque random values, each new (mockoidc's are JWTs that
//     repeat within a second), mapped to mockoidc's behind the scenes;
//   - refresh tokens rotate: each refresh returns a new one and the old one
//     is refused with invalid_grant (SetRotation turns this off);
//   - Revoke ends a grant: its refresh tokens get invalid_grant and its
//     access tokens are refused by the MCP server;
//   - FailNext answers the next token requests with 500;
//   - HoldNext stops the next token request until the test lets it go, so
//     a test orders events around a refresh in flight without sleeping;
//   - expires_in is in seconds (mockoidc writes nanoseconds), and
//     client_secret_basic works as its metadata says;
//   - the server's clock can be moved forward (Advance), so a test expires
//     access tokens without waiting;
//   - requests are counted (Counts), and mockoidc, whose state has no
//     locks, sees one request at a time;
//   - dynamic client registration (RFC 7591): the metadata names a
//     registration endpoint (RegistrationURL, served beside the MCP
//     server), each registration gets its own client ID and secret
//     (Registrations lists what was asked), which the authorization and
//     token endpoints take as the preregistered client's;
//   - DenyNext answers the next authorization requests by redirecting
//     with error=access_denied, as when the user declines.
//
// The MCP server (MCPURL) runs on streamable HTTP behind the SDK's
// auth.RequireBearerToken, with a verifier that accepts only unexpired,
// unrevoked access tokens of this authorization server; it serves its
// protected resource metadata (RFC 9728) naming the authorization server,
// at the well-known URLs the SDK's client looks at. Its tools: echo (read
// only) and write_note (a write), whose notes Notes returns.
package oauthtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/oauth2-proxy/mockoidc"
	"golang.org/x/oauth2"
)

// Scope is the scope the MCP server's metadata names and Authorize asks
// for. (mockoidc knows only OpenID Connect's scopes.)
const Scope = "openid"

// DefaultAccessTTL is how long an access token lives unless SetAccessTTL
// says otherwise.
const DefaultAccessTTL = time.Hour

// refreshTTL is the life of mockoidc's refresh tokens behind ours: long
// enough that Advance never ends one.
const refreshTTL = 365 * 24 * time.Hour

// Counts are what the servers have seen so far.
type Counts struct {
	// TokenRequests is every request to the token endpoint, failed or not.
	TokenRequests int
	// Exchanges and Refreshes are the token requests that got a token:
	// for an authorization code and for a refresh token.
	Exchanges, Refreshes int
	// Refused is the token requests answered with an OAuth error (such as
	// invalid_grant); Failed those FailNext answered with 500.
	Refused, Failed int
	// MCPAccepted and MCPRefused count the HTTP requests to the MCP
	// server whose bearer token the verifier accepted and refused. (An MCP
	// session makes several.)
	MCPAccepted, MCPRefused int
	// Registrations is the clients registered dynamically.
	Registrations int
}

// Registration is what a dynamic client registration asked for.
type Registration struct {
	ClientID      string   `json:"-"`
	RedirectURIs  []string `json:"redirect_uris"`
	GrantTypes    []string `json:"grant_types"`
	ResponseTypes []string `json:"response_types"`
	ClientName    string   `json:"client_name"`
	Scope         string   `json:"scope"`
}

// Server is a running authorization server with its MCP server. Its
// methods may be called from any goroutine.
type Server struct {
	oidc    *mockoidc.MockOIDC
	mcp     *httptest.Server
	mcpBase string

	// mu is held around every call into mockoidc and every change below.
	mu        sync.Mutex
	offset    time.Duration // how far Advance moved the clock
	accessTTL time.Duration
	noRotate  bool
	failNext  int
	hold      *Hold
	counts    Counts
	// refresh maps each live refresh token to its grant; rotated holds
	// those a refresh replaced.
	refresh map[string]*grant
	rotated map[string]*grant
	access  map[string]*accessToken
	notes   map[string]string
	// clients maps each dynamically registered client ID to its secret.
	clients       map[string]string
	registrations []Registration
	denyNext      int
}

// grant is one authorization: what every token from one code exchange
// and the refreshes after it share.
type grant struct {
	jwt     string // mockoidc's refresh token
	scopes  []string
	subject string
	revoked bool
}

type accessToken struct {
	grant   *grant
	jwt     string // mockoidc's access token
	expires time.Time
}

// Start starts both servers on loopback addresses; t's cleanup stops them.
func Start(t testing.TB) *Server {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	m.AccessTTL = DefaultAccessTTL
	m.RefreshTTL = refreshTTL
	m.CodeChallengeMethodsSupported = []string{"S256"}
	s := &Server{
		oidc:      m,
		accessTTL: DefaultAccessTTL,
		refresh:   map[string]*grant{},
		rotated:   map[string]*grant{},
		access:    map[string]*accessToken{},
		notes:     map[string]string{},
		clients:   map[string]string{},
	}
	if err := m.AddMiddleware(s.front); err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	s.mcp = httptest.NewUnstartedServer(nil)
	s.mcpBase = "http://" + s.mcp.Listener.Addr().String()
	s.mcp.Config.Handler = s.mcpHandler()
	s.mcp.Start()
	t.Cleanup(func() {
		s.mu.Lock()
		h := s.hold
		s.mu.Unlock()
		if h != nil {
			h.Release()
		}
		s.mcp.CloseClientConnections()
		s.mcp.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Server.Shutdown(ctx)
	})
	return s
}

// Issuer is the authorization server's issuer; its metadata is at
// Issuer()+"/.well-known/openid-configuration".
func (s *Server) Issuer() string { return s.oidc.Issuer() }

// AuthURL and TokenURL are the authorization and token endpoints.
func (s *Server) AuthURL() string  { return s.oidc.AuthorizationEndpoint() }
func (s *Server) TokenURL() string { return s.oidc.TokenEndpoint() }

// ClientID and ClientSecret are the preregistered client's, random for
// each Server. The secret goes in the request body or in a Basic
// Authorization header.
func (s *Server) ClientID() string     { return s.oidc.ClientID }
func (s *Server) ClientSecret() string { return s.oidc.ClientSecret }

// MCPURL is the MCP server's endpoint, the OAuth resource its tokens are
// for. ResourceMetadataURL is its protected resource metadata.
func (s *Server) MCPURL() string { return s.mcpBase + "/mcp" }

// RegistrationURL is the dynamic client registration endpoint the
// authorization server's metadata names.
func (s *Server) RegistrationURL() string { return s.mcpBase + "/register" }

// Registrations returns the dynamic client registrations so far, in order.
func (s *Server) Registrations() []Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Registration(nil), s.registrations...)
}

// DenyNext makes the next n authorization requests redirect back with
// error=access_denied (and their state), as when the user declines.
func (s *Server) DenyNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denyNext = n
}
func (s *Server) ResourceMetadataURL() string {
	return s.mcpBase + "/.well-known/oauth-protected-resource/mcp"
}

// Config is an oauth2.Config for the preregistered client, with
// redirectURL (mockoidc sends the code to any), asking for Scope.
func (s *Server) Config(redirectURL string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     s.ClientID(),
		ClientSecret: s.ClientSecret(),
		Endpoint:     oauth2.Endpoint{AuthURL: s.AuthURL(), TokenURL: s.TokenURL(), AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL:  redirectURL,
		Scopes:       []string{Scope},
	}
}

// SetAccessTTL sets the life of the access tokens issued from now on.
func (s *Server) SetAccessTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accessTTL = d
	s.oidc.AccessTTL = d
}

// SetRotation says whether a refresh replaces the refresh token (the
// default) or gives back the same one, which then keeps working.
func (s *Server) SetRotation(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noRotate = !on
}

// FailNext makes the next n token requests fail with 500 and an OAuth
// server_error, before anything else looks at them.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = n
}

// Advance moves the servers' clock forward by d: access tokens whose
// life ends within d are expired from then on, and tokens issued later
// start from the new time. Clients' clocks do not move.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
	s.oidc.FastForward(d)
}

// Revoke ends the grant refresh belongs to (refresh may be any of its
// refresh tokens, current or rotated away): refreshing it is refused with
// invalid_grant, and the MCP server refuses its access tokens.
func (s *Server) Revoke(refresh string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.refresh[refresh]
	if g == nil {
		g = s.rotated[refresh]
	}
	if g == nil {
		return errors.New("oauthtest: Revoke: not a refresh token this server issued")
	}
	g.revoked = true
	return nil
}

// Counts returns what the servers have seen so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Notes returns the notes write_note has written, by name.
func (s *Server) Notes() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.notes))
	for k, v := range s.notes {
		out[k] = v
	}
	return out
}

// Hold is a token request stopped by HoldNext.
type Hold struct {
	arrived, release chan struct{}
	once             sync.Once
}

// Arrived is closed when the held request reaches the token endpoint.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held request go on (or the next one pass, if none has
// come yet). Later calls do nothing.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// HoldNext stops the next token request at the door until the returned
// Hold is released; requests after it pass. The test's cleanup releases
// it if the test did not.
func (s *Server) HoldNext() *Hold {
	h := &Hold{arrived: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = h
	return h
}

// newValue returns a fresh random token value of a kind.
func newValue(kind string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return "oauthtest-" + kind + "-" + hex.EncodeToString(b)
}

// front is the handler in front of each mockoidc endpoint.
func (s *Server) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case mockoidc.TokenEndpoint:
			s.token(w, r, next)
			return
		case mockoidc.AuthorizationEndpoint:
			if err := r.ParseForm(); err != nil {
				oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
				return
			}
			if r.Form.Get("code_challenge_method") != "S256" || r.Form.Get("code_challenge") == "" {
				oauthError(w, http.StatusBadRequest, "invalid_request", "this server requires PKCE with code_challenge_method S256")
				return
			}
			s.mu.Lock()
			_, registered := s.clients[r.Form.Get("client_id")]
			deny := s.denyNext > 0
			if deny {
				s.denyNext--
			}
			s.mu.Unlock()
			if registered {
				r.Form.Set("client_id", s.oidc.ClientID)
			}
			if deny {
				if to, err := url.Parse(r.Form.Get("redirect_uri")); err == nil && to.IsAbs() {
					q := to.Query()
					q.Set("error", "access_denied")
					q.Set("error_description", "the user declined")
					q.Set("state", r.Form.Get("state"))
					to.RawQuery = q.Encode()
					http.Redirect(w, r, to.String(), http.StatusFound)
					return
				}
			}
		case mockoidc.DiscoveryEndpoint:
			s.discovery(w, r, next)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func oauthError(w http.ResponseWriter, status int, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}

// token serves the token endpoint through mockoidc, with the additions
// the package comment lists.
func (s *Server) token(w http.ResponseWriter, r *http.Request, next http.Handler) {
	s.mu.Lock()
	s.counts.TokenRequests++
	h := s.hold
	s.hold = nil
	s.mu.Unlock()
	if h != nil {
		close(h.arrived)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext > 0 {
		s.failNext--
		s.counts.Failed++
		oauthError(w, http.StatusInternalServerError, "server_error", "oauthtest: FailNext made this request fail")
		return
	}
	if err := r.ParseForm(); err != nil {
		s.counts.Refused++
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	// client_secret_basic: mockoidc reads the client from the body only.
	if id, secret, ok := r.BasicAuth(); ok && r.Form.Get("client_id") == "" {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		r.Form.Set("client_id", id)
		r.Form.Set("client_secret", secret)
	}
	if secret, ok := s.clients[r.Form.Get("client_id")]; ok {
		if r.Form.Get("client_secret") != secret {
			s.counts.Refused++
			oauthError(w, http.StatusUnauthorized, "invalid_client", "wrong client secret for the registered client")
			return
		}
		r.Form.Set("client_id", s.oidc.ClientID)
		r.Form.Set("client_secret", s.oidc.ClientSecret)
	}

	var g *grant
	grantType, old := r.Form.Get("grant_type"), r.Form.Get("refresh_token")
	switch grantType {
	case "refresh_token":
		g = s.refresh[old]
		why := ""
		switch {
		case g == nil && s.rotated[old] != nil:
			why = "the refresh token was replaced by a newer one at an earlier refresh"
		case g == nil:
			why = "not a refresh token this server issued"
		case g.revoked:
			why = "the grant was revoked"
		}
		if why != "" {
			s.counts.Refused++
			oauthError(w, http.StatusBadRequest, "invalid_grant", why)
			return
		}
		r.Form.Set("refresh_token", g.jwt)
	case "authorization_code":
		g = &grant{}
		if sess, err := s.oidc.SessionStore.GetSessionByID(r.Form.Get("code")); err == nil {
			g.scopes = sess.Scopes
			g.subject = sess.User.ID()
		}
	}

	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		s.counts.Refused++
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	var resp map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "oauthtest: mockoidc's answer is not JSON: "+err.Error())
		return
	}
	jwtAccess, _ := resp["access_token"].(string)
	jwtRefresh, _ := resp["refresh_token"].(string)
	access := newValue("access")
	s.access[access] = &accessToken{grant: g, jwt: jwtAccess, expires: s.oidc.Now().Add(s.accessTTL)}
	resp["access_token"] = access
	resp["token_type"] = "Bearer"
	resp["expires_in"] = int64(s.accessTTL / time.Second)
	if grantType == "authorization_code" {
		g.jwt = jwtRefresh
		refresh := newValue("refresh")
		s.refresh[refresh] = g
		resp["refresh_token"] = refresh
		s.counts.Exchanges++
	} else {
		if s.noRotate {
			resp["refresh_token"] = old
		} else {
			delete(s.refresh, old)
			s.rotated[old] = g
			refresh := newValue("refresh")
			s.refresh[refresh] = g
			resp["refresh_token"] = refresh
		}
		s.counts.Refreshes++
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(resp)
}

// discovery serves mockoidc's metadata with the registration endpoint
// added.
func (s *Server) discovery(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rec := httptest.NewRecorder()
	s.mu.Lock()
	next.ServeHTTP(rec, r)
	s.mu.Unlock()
	var meta map[string]any
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &meta) != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "oauthtest: mockoidc's metadata is not JSON")
		return
	}
	meta["registration_endpoint"] = s.RegistrationURL()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(meta)
}

// register is the dynamic client registration endpoint.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST client metadata here", http.StatusMethodNotAllowed)
		return
	}
	var reg Registration
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&reg); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not JSON client metadata: "+err.Error())
		return
	}
	if len(reg.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	reg.ClientID = newValue("client")
	secret := newValue("client-secret")
	s.mu.Lock()
	s.clients[reg.ClientID] = secret
	s.registrations = append(s.registrations, reg)
	s.counts.Registrations++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{
		"client_id": reg.ClientID, "client_secret": secret, "client_secret_expires_at": 0,
		"redirect_uris": reg.RedirectURIs, "grant_types": reg.GrantTypes, "response_types": reg.ResponseTypes,
		"client_name": reg.ClientName, "token_endpoint_auth_method": "client_secret_post",
	})
}

// verify is the MCP server's token verifier.
func (s *Server) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refuse := func(why string) (*auth.TokenInfo, error) {
		s.counts.MCPRefused++
		return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, why)
	}
	a := s.access[token]
	switch {
	case a == nil:
		return refuse("not an access token of this server's authorization server")
	case a.grant.revoked:
		return refuse("the token's grant was revoked")
	case !s.oidc.Now().Before(a.expires):
		return refuse("the token has expired")
	}
	if _, err := s.oidc.Keypair.VerifyJWT(a.jwt, s.oidc.Now); err != nil {
		return refuse("the token's signature or claims do not check out")
	}
	s.counts.MCPAccepted++
	// The middleware compares Expiration with the real clock.
	return &auth.TokenInfo{Scopes: a.grant.scopes, Expiration: a.expires.Add(-s.offset), UserID: a.grant.subject}, nil
}

// Tool names of the MCP server.
const (
	EchoTool      = "echo"
	WriteNoteTool = "write_note"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to give back"`
}

type noteIn struct {
	Name string `json:"name" jsonschema:"the note's name"`
	Text string `json:"text" jsonschema:"the note's text"`
}

func (s *Server) mcpHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "oauthtest", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: EchoTool, Description: "Give back the text it is sent.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Echo"}},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	no := false
	mcp.AddTool(srv, &mcp.Tool{Name: WriteNoteTool, Description: "Write a note: create it or replace its text.", Annotations: &mcp.ToolAnnotations{Title: "Write a note", DestructiveHint: &no, IdempotentHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			if in.Name == "" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "a note needs a name"}}}, nil, nil
			}
			s.mu.Lock()
			s.notes[in.Name] = in.Text
			s.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Name}}}, nil, nil
		})
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: s.ResourceMetadataURL(),
		Scopes:              []string{Scope},
	})(streamable))
	meta := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               s.MCPURL(),
			AuthorizationServers:   []string{s.Issuer()},
			ScopesSupported:        []string{Scope},
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "oauthtest MCP server",
		}).ServeHTTP(w, r)
	})
	mux.HandleFunc("/register", s.register)
	mux.Handle("/.well-known/oauth-protected-resource/mcp", meta)
	mux.Handle("/.well-known/oauth-protected-resource", meta)
	return mux
}

// Authorize runs the whole authorization code flow with PKCE (S256) for
// the preregistered client, headlessly: it plays the browser at the
// authorization endpoint and exchanges the code. It returns the token,
// with its refresh token.
func (s *Server) Authorize(t testing.TB) *oauth2.Token {
	t.Helper()
	const redirect = "http://127.0.0.1/oauthtest-callback"
	cfg := s.Config(redirect)
	verifier := oauth2.GenerateVerifier()
	state := newValue("state")
	code, err := s.follow(t.Context(), cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), state)
	if err != nil {
		t.Fatalf("oauthtest: authorizing: %v", err)
	}
	tok, err := cfg.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("oauthtest: exchanging the code: %v", err)
	}
	return tok
}

// follow asks authURL for a code, as a browser would, and returns the
// code from the redirect, checking its state.
func (s *Server) follow(ctx context.Context, authURL, state string) (string, error) {
	loc, err := Approve(ctx, authURL)
	if err != nil {
		return "", err
	}
	q := loc.Query()
	if got := q.Get("state"); got != state {
		return "", fmt.Errorf("the redirect's state %q is not the one sent", got)
	}
	if q.Get("code") == "" {
		return "", fmt.Errorf("the redirect carries no code (error %q)", q.Get("error"))
	}
	return q.Get("code"), nil
}

// Approve plays the user's browser at authURL (the URL an OAuth client
// would open): the server approves at once, and Approve returns where it
// redirects, without going there. A test of a client with a loopback
// redirect then gets that URL itself (see Browse).
func Approve(ctx context.Context, authURL string) (*url.URL, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return nil, fmt.Errorf("the authorization endpoint answered %s: %s %s", resp.Status, e.Error, e.Description)
	}
	return resp.Location()
}

// Browse plays the user's browser through the whole step: it approves at
// authURL and then follows the redirect to the client's loopback
// callback, returning an error unless the callback answers 2xx.
func Browse(ctx context.Context, authURL string) error {
	loc, err := Approve(ctx, authURL)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("going to the redirect: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the client's callback answered %s", resp.Status)
	}
	return nil
}

// BearerClient is an HTTP client that sends access as a bearer token on
// every request.
func BearerClient(access string) *http.Client {
	return &http.Client{Transport: bearer{access, http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Connect opens an MCP session with the MCP server, sending access as
// the bearer token.
func (s *Server) Connect(ctx context.Context, access string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "oauthtest-client", Version: "1.0.0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: BearerClient(access), MaxRetries: -1, DisableStandaloneSSE: true}, nil)
}

// Echo connects with access, calls the echo tool with text and returns
// what it said; an error when the server refused the token.
func (s *Server) Echo(ctx context.Context, access, text string) (string, error) {
	cs, err := s.Connect(ctx, access)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: EchoTool, Arguments: map[string]any{"text": text}})
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("echo: %s", out.String())
	}
	return out.String(), nil
}
