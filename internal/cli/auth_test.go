package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/testkit/oauthtest"
)

// testBrowserEnv set to 1 makes this test binary a browser: TestMain then
// plays the user at the URL it is given (oauthtest.Browse), following the
// redirect to mst's loopback callback, and exits. $BROWSER names the
// binary.
const testBrowserEnv = "MST_TEST_BROWSER"

func testBrowser() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "test browser: no URL given")
		return 2
	}
	if err := oauthtest.Browse(context.Background(), os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "test browser:", err)
		return 1
	}
	return 0
}

// authEnv is an authorization server with its MCP server, an eval config
// declaring it, and a local credential store in a fresh folder.
type authEnv struct {
	srv                 *oauthtest.Server
	dir, eval, storeDir string
	secretsFile         string
	outputs             []string // every stdout and stderr so far
	browserEnv          []string
}

// newAuthEnv writes an eval config whose server notes is the test MCP
// server with oauth (preregistered: the test server's client, its secret
// from a secrets file; else {} for dynamic registration), beside a stdio
// server and an HTTP server without oauth.
func newAuthEnv(t *testing.T, preregistered bool) *authEnv {
	t.Helper()
	e := &authEnv{srv: oauthtest.Start(t), dir: t.TempDir()}
	e.storeDir = filepath.Join(e.dir, "credentials")
	e.secretsFile = filepath.Join(e.dir, "secrets.env")
	if err := os.WriteFile(e.secretsFile, []byte("NOTES_CLIENT_SECRET="+e.srv.ClientSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.dir, "cases.jsonl"), []byte(`{"id": "c1", "input": "hello"}`+"\n"), 0o644)
	oauth := "{}"
	if preregistered {
		oauth = fmt.Sprintf("{clientId: %q, clientSecret: '${secret:NOTES_CLIENT_SECRET}'}", e.srv.ClientID())
	}
	cfg := fmt.Sprintf(`name: auth
datasets: [cases.jsonl]
servers:
  notes:
    url: %s
    oauth: %s
  plain:
    url: http://127.0.0.1:1/mcp
  local:
    command: sh
variants:
  v:
    model: offline
`, e.srv.MCPURL(), oauth)
	e.eval = filepath.Join(e.dir, "eval.yaml")
	if err := os.WriteFile(e.eval, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.browserEnv = []string{"BROWSER=" + exe, testBrowserEnv + "=1"}
	return e
}

// mst runs mst in-process with the store folder, stdin in and the extra
// environment env.
func (e *authEnv) mst(t *testing.T, in io.Reader, stderr io.Writer, env []string, args ...string) mstResult {
	t.Helper()
	var stdout, errBuf bytes.Buffer
	var errW io.Writer = &errBuf
	if stderr != nil {
		errW = io.MultiWriter(&errBuf, stderr)
	}
	if in == nil {
		in = strings.NewReader("")
	}
	args = append(args, "--store-option", "dir="+e.storeDir)
	code := cli.Main(t.Context(), args, cli.Stdio{In: in, Out: &stdout, Err: errW, Env: append(os.Environ(), env...)})
	e.outputs = append(e.outputs, stdout.String(), errBuf.String())
	return mstResult{code, stdout.String(), errBuf.String()}
}

// grant reads the stored grant as a run would.
func (e *authEnv) grant(t *testing.T) credstore.Grant {
	t.Helper()
	st, err := credstore.OpenLocal(e.storeDir, "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.Get(t.Context(), "notes")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkNoSecrets checks that no value of g's tokens and client secret is
// in the store's folder, the key file or anything mst printed.
func (e *authEnv) checkNoSecrets(t *testing.T, g credstore.Grant) {
	t.Helper()
	values := map[string]string{"access token": g.Token.AccessToken, "refresh token": g.Token.RefreshToken, "client secret": g.ClientSecret}
	var files [][]byte
	names := []string{}
	filepath.WalkDir(e.storeDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			files = append(files, b)
			names = append(names, path)
		}
		return nil
	})
	if b, err := os.ReadFile(e.storeDir + ".key"); err == nil {
		files = append(files, b)
		names = append(names, e.storeDir+".key")
	}
	if len(files) == 0 {
		t.Fatalf("the store folder %s holds no files", e.storeDir)
	}
	for what, v := range values {
		if v == "" {
			t.Errorf("the grant has no %s", what)
			continue
		}
		for i, b := range files {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds the %s in clear", names[i], what)
			}
		}
		for _, out := range e.outputs {
			if strings.Contains(out, v) {
				t.Errorf("mst printed the %s:\n%s", what, out)
			}
		}
	}
}

// The whole flow with a browser: a preregistered confidential client
// whose secret comes from the secrets file; then list, revoke, list.
func TestAuthBrowser(t *testing.T) {
	e := newAuthEnv(t, true)
	r := e.mst(t, nil, nil, e.browserEnv, "auth", "notes", "-c", e.eval, "--secrets-file", e.secretsFile)
	if r.code != 0 {
		t.Fatalf("mst auth exited %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{`Authorised server "notes"`, "2 tools", e.storeDir} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("mst auth's output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, e.srv.AuthURL()+"?") || !strings.Contains(r.stderr, "A browser was opened") {
		t.Errorf("mst auth did not print the URL and open the browser:\n%s", r.stderr)
	}
	g := e.grant(t)
	if g.ClientID != e.srv.ClientID() || g.ClientSecret != e.srv.ClientSecret() || g.TokenEndpoint != e.srv.TokenURL() || g.Resource != e.srv.MCPURL() || g.Issuer != e.srv.Issuer() {
		t.Errorf("stored grant: client %q, token endpoint %q, resource %q, issuer %q", g.ClientID, g.TokenEndpoint, g.Resource, g.Issuer)
	}
	if _, err := e.srv.Echo(t.Context(), g.Token.AccessToken, "x"); err != nil {
		t.Errorf("the stored access token does not work: %v", err)
	}

	r = e.mst(t, nil, nil, nil, "auth", "list")
	if r.code != 0 {
		t.Fatalf("mst auth list exited %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "notes ") || !strings.Contains(lines[1], e.srv.MCPURL()) || !strings.Contains(lines[1], oauthtest.Scope) || !strings.Contains(lines[1], " yes ") {
		t.Errorf("mst auth list:\n%s", r.stdout)
	}
	r = e.mst(t, nil, nil, nil, "auth", "list", "--json")
	var listed struct {
		Store  string            `json:"store"`
		Grants []credstore.Grant `json:"grants"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || r.code != 0 {
		t.Fatalf("mst auth list --json: %v (exit %d)\n%s%s", err, r.code, r.stdout, r.stderr)
	}
	if listed.Store != "local" || len(listed.Grants) != 1 || listed.Grants[0].Server != "notes" || listed.Grants[0].Listed == nil || !listed.Grants[0].Listed.RefreshToken || !listed.Grants[0].Listed.ClientSecret || listed.Grants[0].Token == nil || listed.Grants[0].Token.Expiry.IsZero() {
		t.Errorf("mst auth list --json = %s", r.stdout)
	}
	e.checkNoSecrets(t, g)

	r = e.mst(t, nil, nil, nil, "auth", "revoke", "notes")
	if r.code != 0 || !strings.Contains(r.stdout, `Removed the grant for server "notes"`) || !strings.Contains(r.stdout, "provider may still consider the grant live") {
		t.Errorf("mst auth revoke exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = e.mst(t, nil, nil, nil, "auth", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "No grants") {
		t.Errorf("mst auth list after revoke exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = e.mst(t, nil, nil, nil, "auth", "revoke", "notes")
	if r.code != 1 || !strings.Contains(r.stderr, `no grant for server "notes"`) {
		t.Errorf("a second revoke exited %d:\n%s", r.code, r.stderr)
	}
}

// paster is mst's stderr in the paste test: when the URL to open comes
// by, it approves it as the user would in a browser elsewhere and pastes
// the address the browser ended at on stdin.
type paster struct {
	t     *testing.T
	paste io.WriteCloser
	mu    sync.Mutex
	buf   bytes.Buffer
	done  bool
	wg    sync.WaitGroup
}

func (p *paster) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Write(b)
	if p.done {
		return len(b), nil
	}
	for _, line := range strings.Split(p.buf.String(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "http") && strings.Contains(line, "code_challenge=") {
			p.done = true
			p.wg.Go(func() {
				loc, err := oauthtest.Approve(p.t.Context(), line)
				if err != nil {
					p.t.Errorf("approving: %v", err)
					p.paste.Close()
					return
				}
				io.WriteString(p.paste, loc.String()+"\n")
			})
			break
		}
	}
	return len(b), nil
}

// --no-browser with dynamic client registration: the URL is printed, the
// address pasted; --json prints the grant without its secrets.
func TestAuthPaste(t *testing.T) {
	e := newAuthEnv(t, false)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	p := &paster{t: t, paste: pw}
	// A browser that would fail the test, were it opened.
	r := e.mst(t, pr, p, []string{"BROWSER=" + filepath.Join(e.dir, "no-such-browser")}, "auth", "notes", "-c", e.eval, "--no-browser", "--json")
	p.wg.Wait()
	if r.code != 0 {
		t.Fatalf("mst auth --no-browser exited %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "browser was opened") || strings.Contains(r.stderr, "Could not open a browser") || !strings.Contains(r.stderr, "paste it here") {
		t.Errorf("mst auth --no-browser tried a browser or did not offer the paste:\n%s", r.stderr)
	}
	var shown credstore.Grant
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("mst auth --json: %v\n%s", err, r.stdout)
	}
	regs := e.srv.Registrations()
	if len(regs) != 1 {
		t.Fatalf("%d dynamic registrations, want 1", len(regs))
	}
	g := e.grant(t)
	if g.ClientID != regs[0].ClientID || shown.ClientID != g.ClientID || shown.Server != "notes" || shown.Listed == nil || !shown.Listed.AccessToken || !shown.Listed.RefreshToken {
		t.Errorf("mst auth --json = %s; stored client %q, registered %q", r.stdout, g.ClientID, regs[0].ClientID)
	}
	e.checkNoSecrets(t, g)
}

// The authorization server refuses (the user declined): mst says so,
// naming the server, and stores nothing.
func TestAuthDenied(t *testing.T) {
	e := newAuthEnv(t, true)
	e.srv.DenyNext(1)
	r := e.mst(t, nil, nil, e.browserEnv, "auth", "notes", "-c", e.eval, "--secrets-file", e.secretsFile)
	if r.code != 1 || !strings.Contains(r.stderr, `server "notes"`) || !strings.Contains(r.stderr, "access_denied") {
		t.Errorf("mst auth when refused exited %d:\n%s", r.code, r.stderr)
	}
	r = e.mst(t, nil, nil, nil, "auth", "list")
	if !strings.Contains(r.stdout, "No grants") {
		t.Errorf("mst auth list after a refusal:\n%s%s", r.stdout, r.stderr)
	}
}

// Bad commands and configs: each says what is wrong and how to fix it,
// and exits 2 before any authorization starts.
func TestAuthErrors(t *testing.T) {
	e := newAuthEnv(t, true)
	noSecret := filepath.Join(e.dir, "other.env")
	os.WriteFile(noSecret, []byte("OTHER=something-long\n"), 0o600)
	for name, c := range map[string]struct {
		args []string
		want []string
	}{
		"unknown server":     {[]string{"auth", "nope", "-c", e.eval}, []string{`no server "nope"`, "connector servers: notes"}},
		"no oauth":           {[]string{"auth", "plain", "-c", e.eval}, []string{`server "plain"`, "no oauth block", "oauth: {}"}},
		"stdio server":       {[]string{"auth", "local", "-c", e.eval}, []string{`server "local"`, "stdio server", "oauth block"}},
		"no config":          {[]string{"auth", "notes"}, []string{"-c eval.yaml"}},
		"no secrets file":    {[]string{"auth", "notes", "-c", e.eval}, []string{"servers.notes.oauth.clientSecret", "NOTES_CLIENT_SECRET", "--secrets-file"}},
		"secret not set":     {[]string{"auth", "notes", "-c", e.eval, "--secrets-file", noSecret}, []string{"NOTES_CLIENT_SECRET", noSecret, "add a line"}},
		"unknown store":      {[]string{"auth", "list", "--store", "vault"}, []string{`unknown credential store "vault"`, "local"}},
		"bad store option":   {[]string{"auth", "list", "--store-option", "colour=blue"}, []string{`no option "colour"`, "dir", "--store-option"}},
		"store option shape": {[]string{"auth", "revoke", "notes", "--store-option", "dir"}, []string{"KEY=VALUE"}},
		"two servers":        {[]string{"auth", "notes", "plain", "-c", e.eval}, []string{"one connector server"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.mst(t, nil, nil, e.browserEnv, c.args...)
			if r.code != int(cli.ExitUsage) {
				t.Errorf("exit %d, want %d:\n%s", r.code, cli.ExitUsage, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("error lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	if n := e.srv.Counts().TokenRequests; n != 0 {
		t.Errorf("%d token requests, want none", n)
	}
	r := e.mst(t, nil, nil, nil, "auth", "--help")
	for _, w := range []string{"connector server", "http://127.0.0.1:PORT/callback", "--no-browser", "refresh token never leaves", "mst auth revoke"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("mst auth --help lacks %q", w)
		}
	}
}

// TestAuthBucketErrors: the bucket store without its key, or without a
// place for its grants, says what to give; a missing key never sends the
// user to the store's options.
func TestAuthBucketErrors(t *testing.T) {
	t.Parallel()
	noKey := filepath.Join(t.TempDir(), "s.env")
	os.WriteFile(noKey, []byte("OTHER=something-long\n"), 0o600)
	for _, c := range []struct {
		args, want []string
		options    bool
	}{
		{[]string{"auth", "list", "--store", "bucket", "--store-option", "url=gs://b/x", "--secrets-file", noKey}, []string{"the secrets file holds no MST_CREDENTIALS_KEY", "mst auth new-key >> FILE"}, false},
		{[]string{"auth", "revoke", "notes", "--store", "bucket", "--store-option", "url=gs://b/x"}, []string{"no --secrets-file was given", "mst auth new-key"}, false},
		{[]string{"auth", "list", "--store", "bucket", "--secrets-file", noKey}, []string{"give --store-option url=gs://BUCKET/PREFIX"}, true},
	} {
		r := runCLI(t, c.args...)
		if r.code != int(cli.ExitUsage) {
			t.Errorf("mst %v: exit %d, want %d:\n%s", c.args, r.code, cli.ExitUsage, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("mst %v: error lacks %q:\n%s", c.args, w, r.stderr)
			}
		}
		if got := strings.Contains(r.stderr, "fix its --store-option settings"); got != c.options {
			t.Errorf("mst %v: sends the user to the store's options: %v, want %v:\n%s", c.args, got, c.options, r.stderr)
		}
	}
}
