package oauthtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mst-eval/mst/internal/testkit/oauthtest"
)

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func TestMetadata(t *testing.T) {
	s := oauthtest.Start(t)
	var as struct {
		Issuer        string   `json:"issuer"`
		TokenEndpoint string   `json:"token_endpoint"`
		AuthEndpoint  string   `json:"authorization_endpoint"`
		PKCE          []string `json:"code_challenge_methods_supported"`
	}
	getJSON(t, s.Issuer()+"/.well-known/openid-configuration", &as)
	if as.Issuer != s.Issuer() || as.TokenEndpoint != s.TokenURL() || as.AuthEndpoint != s.AuthURL() || !slices.Equal(as.PKCE, []string{"S256"}) {
		t.Errorf("authorization server metadata = %+v", as)
	}
	var prm oauthex.ProtectedResourceMetadata
	getJSON(t, s.ResourceMetadataURL(), &prm)
	if prm.Resource != s.MCPURL() || !slices.Equal(prm.AuthorizationServers, []string{s.Issuer()}) {
		t.Errorf("protected resource metadata = %+v", prm)
	}
	resp, err := http.Post(s.MCPURL(), "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), s.ResourceMetadataURL()) {
		t.Errorf("a request with no token: %s, WWW-Authenticate %q; want 401 naming the metadata", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
}

func TestPKCERequired(t *testing.T) {
	s := oauthtest.Start(t)
	cfg := s.Config("http://127.0.0.1/cb")
	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"no PKCE": nil,
		"plain":   {oauth2.SetAuthURLParam("code_challenge", "abc"), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
	} {
		if _, err := oauthtest.Approve(t.Context(), cfg.AuthCodeURL("st", opts...)); err == nil || !strings.Contains(err.Error(), "S256") {
			t.Errorf("%s: Approve = %v, want a refusal asking for S256", name, err)
		}
	}
}

func TestRotationRevocationFailure(t *testing.T) {
	s := oauthtest.Start(t)
	tok := s.Authorize(t)
	refresh := func(rt string) (*oauth2.Token, error) {
		return s.Config("").TokenSource(t.Context(), &oauth2.Token{RefreshToken: rt}).Token()
	}
	isGrantError := func(err error) bool {
		var re *oauth2.RetrieveError
		return errors.As(err, &re) && re.ErrorCode == "invalid_grant"
	}
	next, err := refresh(tok.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if next.RefreshToken == tok.RefreshToken || next.AccessToken == tok.AccessToken {
		t.Error("a refresh gave back the same tokens")
	}
	if _, err := refresh(tok.RefreshToken); !isGrantError(err) {
		t.Errorf("refreshing with a rotated refresh token: %v, want invalid_grant", err)
	}

	s.SetRotation(false)
	same, err := refresh(next.RefreshToken)
	if err != nil || same.RefreshToken != next.RefreshToken {
		t.Fatalf("without rotation: %v (same refresh token: %t)", err, err == nil && same.RefreshToken == next.RefreshToken)
	}
	if _, err := refresh(next.RefreshToken); err != nil {
		t.Errorf("without rotation, a second refresh with the same token: %v", err)
	}

	s.FailNext(2)
	for range 2 {
		var re *oauth2.RetrieveError
		if _, err := refresh(next.RefreshToken); !errors.As(err, &re) || re.Response.StatusCode != 500 {
			t.Errorf("with FailNext: %v, want a 500", err)
		}
	}
	if _, err := refresh(next.RefreshToken); err != nil {
		t.Errorf("after FailNext ran out: %v", err)
	}

	if _, err := s.Echo(t.Context(), same.AccessToken, "x"); err != nil {
		t.Fatalf("echo before revoking: %v", err)
	}
	if err := s.Revoke(tok.RefreshToken); err != nil { // a rotated-away one names the grant too
		t.Fatal(err)
	}
	if _, err := refresh(next.RefreshToken); !isGrantError(err) {
		t.Errorf("refreshing a revoked grant: %v, want invalid_grant", err)
	}
	if _, err := s.Echo(t.Context(), same.AccessToken, "x"); err == nil {
		t.Error("the MCP server took an access token of a revoked grant")
	}
	c := s.Counts()
	if c.Exchanges != 1 || c.Refreshes != 4 || c.Failed != 2 || c.Refused != 2 || c.TokenRequests != 9 || c.MCPAccepted == 0 || c.MCPRefused == 0 {
		t.Errorf("counts = %+v", c)
	}
}

// client_secret_basic, which the metadata offers, works.
func TestClientSecretBasic(t *testing.T) {
	s := oauthtest.Start(t)
	cfg := s.Config("")
	cfg.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	tok := s.Authorize(t)
	if _, err := cfg.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err != nil {
		t.Fatal(err)
	}
	if c := s.Counts(); c.TokenRequests != 2 || c.Refreshes != 1 {
		t.Errorf("counts = %+v, want the refresh to work at once", c)
	}
}

// The SDK's own client runs MCP's authorization flow against the
// servers: it is told 401, finds the resource metadata and the
// authorization server, and gets a token with PKCE for the
// preregistered client; the write tool then works.
func TestSDKAuthorizationFlow(t *testing.T) {
	s := oauthtest.Start(t)
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: s.ClientID(), ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: s.ClientSecret()}},
		RedirectURL:              "http://127.0.0.1/callback",
		AuthorizationCodeFetcher: approveFetcher,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := sdkConnect(t, s, h)
	defer cs.Close()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == oauthtest.WriteNoteTool && (tool.Annotations == nil || tool.Annotations.ReadOnlyHint) {
			t.Errorf("the write tool is not annotated as a write: %+v", tool.Annotations)
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: oauthtest.WriteNoteTool, Arguments: map[string]any{"name": "todo", "text": "buy milk"}})
	if err != nil || res.IsError {
		t.Fatalf("write_note: %v %+v", err, res)
	}
	if got := s.Notes()["todo"]; got != "buy milk" {
		t.Errorf("note todo = %q", got)
	}
	if n := s.Counts().Exchanges; n != 1 {
		t.Errorf("%d code exchanges, want 1", n)
	}
}

// The metadata offers dynamic client registration; a registered client
// gets its own ID and secret, which the token endpoint checks, and the
// SDK's client registers one and gets a token with it.
func TestDynamicRegistration(t *testing.T) {
	s := oauthtest.Start(t)
	asm, err := auth.GetAuthServerMetadata(t.Context(), s.Issuer(), nil)
	if err != nil || asm == nil || asm.RegistrationEndpoint != s.RegistrationURL() {
		t.Fatalf("metadata %+v (%v), want registration endpoint %s", asm, err, s.RegistrationURL())
	}
	const redirect = "http://127.0.0.1/callback"
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{redirect}, GrantTypes: []string{"authorization_code", "refresh_token"}, ClientName: "test",
		}},
		AuthorizationCodeFetcher: approveFetcher,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := sdkConnect(t, s, h)
	cs.Close()
	regs := s.Registrations()
	if len(regs) != 1 || regs[0].ClientID == s.ClientID() || !slices.Equal(regs[0].RedirectURIs, []string{redirect}) || regs[0].ClientName != "test" {
		t.Fatalf("registrations = %+v", regs)
	}
	if c := s.Counts(); c.Registrations != 1 || c.Exchanges != 1 {
		t.Errorf("counts = %+v", c)
	}
	// The registered ID with a wrong secret is refused.
	cfg := oauth2.Config{ClientID: regs[0].ClientID, ClientSecret: "wrong", Endpoint: oauth2.Endpoint{TokenURL: s.TokenURL(), AuthStyle: oauth2.AuthStyleInParams}}
	tok := s.Authorize(t)
	var re *oauth2.RetrieveError
	if _, err := cfg.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); !errors.As(err, &re) || re.ErrorCode != "invalid_client" {
		t.Errorf("a registered client with a wrong secret: %v, want invalid_client", err)
	}
}

// DenyNext redirects back with error=access_denied and the state.
func TestDenyNext(t *testing.T) {
	s := oauthtest.Start(t)
	s.DenyNext(1)
	cfg := s.Config("http://127.0.0.1/cb")
	v := oauth2.GenerateVerifier()
	for i, want := range []string{"access_denied", ""} {
		loc, err := oauthtest.Approve(t.Context(), cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(v)))
		if err != nil {
			t.Fatal(err)
		}
		q := loc.Query()
		if q.Get("error") != want || q.Get("state") != "st" || (want == "") != (q.Get("code") != "") {
			t.Errorf("request %d: redirect %s, want error %q", i, loc, want)
		}
	}
}

// approveFetcher plays the user who approves, for the SDK's handler.
func approveFetcher(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	loc, err := oauthtest.Approve(ctx, args.URL)
	if err != nil {
		return nil, err
	}
	return &auth.AuthorizationResult{Code: loc.Query().Get("code"), State: loc.Query().Get("state")}, nil
}

// sdkConnect connects the SDK's client to s's MCP server through h.
func sdkConnect(t *testing.T, s *oauthtest.Server, h auth.OAuthHandler) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "sdk-client", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.MCPURL(), OAuthHandler: h, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
