package run_test

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
	"time"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/canarytest"
	"github.com/mst-eval/mst/internal/testkit/oauthtest"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// connectorEval writes an eval whose one server is the connector server
// at url: echo cases with long and Unicode ids, and a case that writes a
// note through the write tool.
func connectorEval(t *testing.T, url string, concurrency int, model string) string {
	t.Helper()
	var cases strings.Builder
	for i, id := range []string{"a", "über-🦉", strings.Repeat("長", 80), "d"} {
		fmt.Fprintf(&cases, `{"id": %q, "input": "Please echo 'word %d'", "expect": [{"toolCalled": "echo"}]}`+"\n", id, i)
	}
	cases.WriteString(`{"id": "note", "input": "Write a note", "expect": [{"toolCalled": "write_note"}]}` + "\n")
	return writeEval(t, map[string]string{
		"eval.yaml": fmt.Sprintf(`
name: connector
datasets: [cases.jsonl]
servers:
  notes-v2:
    url: %q
    oauth: {}
    writes: [write_note]
variants:
  v: {%[3]s}
  w: {%[3]s}
limits: {concurrency: %[2]d}
`, url, concurrency, model),
		"cases.jsonl": cases.String(),
	})
}

// authorized stores a grant for server, obtained from s as `mst auth`
// would, in a fresh local store, and returns the store and the grant.
func authorized(t *testing.T, s *oauthtest.Server, server string) (*credstore.Local, credstore.Grant) {
	t.Helper()
	dir := t.TempDir()
	st, err := credstore.OpenLocal(filepath.Join(dir, "credentials"), filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	tok := s.Authorize(t)
	g := credstore.Grant{
		Server: server, Resource: s.MCPURL(), Issuer: s.Issuer(), TokenEndpoint: s.TokenURL(),
		ClientID: s.ClientID(), ClientSecret: s.ClientSecret(), Scopes: []string{oauthtest.Scope},
		Token: tok, Granted: time.Now(),
	}
	if err := st.Put(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	return st, g
}

// taps records both directions of every shard's channel.
type taps struct {
	mu             sync.Mutex
	toWorker, from bytes.Buffer
}

// chanTapped is def whose shards copy both directions of their channel into
// tp.
func chanTapped(def *runner.Definition, tp *taps) *runner.Definition {
	return wrapRunner(def, func(r runner.Runner) runner.Runner { return chanTapRunner{r, tp} })
}

type chanTapRunner struct {
	runner.Runner
	tp *taps
}

type chanTapWriter struct {
	tp *taps
	b  *bytes.Buffer
}

func (w chanTapWriter) Write(p []byte) (int, error) {
	w.tp.mu.Lock()
	defer w.tp.mu.Unlock()
	return w.b.Write(p)
}

func (r chanTapRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	serve := s.Serve
	s.Serve = func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
		return serve(ctx, io.TeeReader(in, chanTapWriter{r.tp, &r.tp.from}), io.MultiWriter(out, chanTapWriter{r.tp, &r.tp.toWorker}), fetch)
	}
	return r.Runner.RunShard(ctx, s)
}

// handedOut lists, in order, the values of token name in the tokens
// messages the coordinator sent.
func (tp *taps) handedOut(t *testing.T, name string) []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	dec := protocol.NewDecoder(bytes.NewReader(tp.toWorker.Bytes()))
	for {
		m, err := dec.Read()
		if err != nil {
			return out
		}
		if tok, ok := m.(*protocol.Tokens); ok {
			if v, ok := tok.Values[name]; ok {
				out = append(out, v)
			}
		}
	}
}

// noneUnder fails t for every file under root that holds one of values.
func noneUnder(t *testing.T, root string, values map[string]string) {
	t.Helper()
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for what, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds the %s", path, what)
			}
		}
		return nil
	})
}

// TestConnectorRun runs an eval with a connector server locally and on
// processes workers: the coordinator mints access tokens from the stored
// grant, the workers connect with them (the write tool too), and the
// refresh token reaches no worker, no stored byte and no log; the access
// token is stored nowhere either.
func TestConnectorRun(t *testing.T) {
	for _, def := range []*runner.Definition{runner.LocalDefinition(), runner.ProcessesDefinition()} {
		t.Run(def.Name, func(t *testing.T) {
			t.Parallel()
			s := oauthtest.Start(t)
			creds, g := authorized(t, s, "notes-v2")
			p, o, shards, printed := canaryRun(t, connectorEval(t, s.MCPURL(), 2, "model: offline"), secrets.New())
			tp := &taps{}
			o.Runner = chanTapped(def, tp)
			if def.Name != runner.LocalDefinition().Name {
				o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": shards}, Shards: 2, Keep: runner.KeepNever}
			}
			o.Credentials = creds
			// The processes runner's workers are read while they run: at
			// their first message.
			var mu sync.Mutex
			var workers []canarytest.Process
			var bundles []string
			o.Runner = watched(o.Runner, io.Discard, func(sh runner.Shard) {
				mu.Lock()
				defer mu.Unlock()
				workers = append(workers, canarytest.Descendants(os.Getpid())...)
				// The bundle as the worker got it, while it runs.
				filepath.WalkDir(sh.BundleDir, func(path string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						b, _ := os.ReadFile(path)
						bundles = append(bundles, string(b))
					}
					return nil
				})
			})
			out, err := run.Execute(t.Context(), p, o)
			if err != nil {
				t.Fatalf("Execute = %v", err)
			}
			if def.Name != runner.LocalDefinition().Name && len(workers) == 0 {
				t.Error("no worker process was seen")
			}
			if out.Run.Collect != transcript.CollectComplete {
				t.Fatalf("run %s: %s", out.Run.Collect, out.Run.Note)
			}
			allPassed(t, out)
			if n := len(s.Notes()); n != 1 {
				t.Errorf("the server holds %d notes, want the one the write case wrote", n)
			}
			if c := s.Counts(); c.MCPAccepted == 0 || c.MCPRefused != 0 {
				t.Errorf("the MCP server accepted %d requests and refused %d; want some, none", c.MCPAccepted, c.MCPRefused)
			}
			// The coordinator sent the access token (so the tap sees the
			// channel), and never the refresh token.
			token := p.ConnectorTokens()["notes-v2"]
			if token != "MST_OAUTH_NOTES_V2" {
				t.Errorf("the token name is %q, want MST_OAUTH_NOTES_V2", token)
			}
			if got := tp.handedOut(t, token); len(got) == 0 || got[0] != g.Token.AccessToken {
				t.Errorf("the workers were handed %d values of %s, want the grant's access token", len(got), token)
			}
			canaries := map[string]string{"refresh token": g.Token.RefreshToken, "client secret": g.ClientSecret}
			tp.mu.Lock()
			for what, v := range canaries {
				if bytes.Contains(tp.toWorker.Bytes(), []byte(v)) || bytes.Contains(tp.from.Bytes(), []byte(v)) {
					t.Errorf("the %s crossed a worker's channel", what)
				}
			}
			tp.mu.Unlock()
			for _, w := range workers {
				for what, v := range canaries {
					if bytes.Contains(w.Cmdline, []byte(v)) || bytes.Contains(w.Environ, []byte(v)) {
						t.Errorf("process %d (%q) holds the %s in its argv or environment", w.PID, w.Cmdline, what)
					}
				}
			}
			canaries["access token"] = g.Token.AccessToken
			if len(bundles) == 0 {
				t.Error("no bundle file was read")
			}
			for _, b := range bundles {
				for what, v := range canaries {
					if strings.Contains(b, v) {
						t.Errorf("a bundle file holds the %s", what)
					}
				}
				if strings.Contains(b, `"oauth"`) && !strings.Contains(b, token) {
					t.Errorf("a bundle declares the connector server without its token's name %s", token)
				}
			}
			noneUnder(t, out.Store.Location(), canaries)
			noneUnder(t, shards, canaries)
			for what, v := range canaries {
				if strings.Contains(printed.String(), v) {
					t.Errorf("the log holds the %s", what)
				}
			}
		})
	}
}

// TestConnectorTokenExpiresMidRun: access tokens that live four seconds,
// a run that lasts longer. Each worker asks for a fresh token before its
// own expires; the coordinator refreshes the grant each time, and the
// authorization server rotates the refresh token each time, which the
// store keeps. Every trial passes on whichever token was current, and the
// grant left in the store still refreshes.
func TestConnectorTokenExpiresMidRun(t *testing.T) {
	t.Parallel()
	s := oauthtest.Start(t)
	// Four seconds, of which the MCP server may honour only three (its
	// tokens' expiry is in whole seconds); the worker asks again after two.
	s.SetAccessTTL(4 * time.Second)
	creds, g := authorized(t, s, "notes-v2")
	// The run must outlast a token: its ten trials run one at a time on
	// a model that takes 250 ms or more to answer each of their requests.
	fake := providertest.New(t, providertest.Script{Offline: true, Latency: 250 * time.Millisecond})
	model := fmt.Sprintf("model: openai/gpt-test, clientOptions: {baseURL: %q, api: chat, maxRetries: 0}", fake.URL+"/v1")
	p, o, shards, _ := canaryRun(t, connectorEval(t, s.MCPURL(), 1, model), secrets.New())
	tp := &taps{}
	o.Runner = chanTapped(runner.ProcessesDefinition(), tp)
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": shards}, Shards: 1, Keep: runner.KeepNever}
	o.Credentials = creds
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	allPassed(t, out)
	got := tp.handedOut(t, p.ConnectorTokens()["notes-v2"])
	if len(got) < 2 {
		t.Fatalf("the worker was handed %d access tokens, want a fresh one mid-run", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Errorf("access token %d of %d handed out is the one before it, not a fresh one", i+1, len(got))
		}
	}
	c := s.Counts()
	if c.Refreshes < 2 || c.Refused != 0 || c.MCPRefused != 0 {
		t.Errorf("counts %+v: want two refreshes or more, no refused grant, no refused MCP request", c)
	}
	after, err := creds.Get(t.Context(), "notes-v2")
	if err != nil {
		t.Fatal(err)
	}
	if after.Token.RefreshToken == g.Token.RefreshToken || after.Refreshed.IsZero() {
		t.Errorf("the store kept the first refresh token (or no refresh time); want the rotated one")
	}
	tokens := &credstore.Tokens{Store: creds}
	if _, _, err := tokens.Token(t.Context(), "notes-v2"); err != nil {
		t.Errorf("the stored grant no longer refreshes: %v", err)
	}
}

// TestConnectorRevokedGrant: with the grant revoked at the authorization
// server, the trials that use the connector server error with cause
// server, and their error names the server and says to run mst auth; a
// variant without the server still runs.
func TestConnectorRevokedGrant(t *testing.T) {
	t.Parallel()
	s := oauthtest.Start(t)
	s.SetAccessTTL(time.Second) // so the coordinator must refresh it
	creds, g := authorized(t, s, "notes-v2")
	if err := s.Revoke(g.Token.RefreshToken); err != nil {
		t.Fatal(err)
	}
	path := writeEval(t, map[string]string{
		"eval.yaml": fmt.Sprintf(`
name: revoked
datasets: [cases.jsonl]
servers:
  notes-v2: {url: %q, oauth: {}}
  local: {command: SERVER}
variants:
  connector: {model: offline, servers: [notes-v2]}
  plain: {model: offline, servers: [local]}
`, s.MCPURL()),
		"cases.jsonl": `{"id": "e", "input": "Please echo 'hi'", "expect": [{"toolCalled": "echo"}]}` + "\n",
	})
	p, o, _, printed := canaryRun(t, path, secrets.New())
	o.Credentials = creds
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	var seen int
	out.Store.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		seen++
		switch tr.Variant {
		case "connector":
			o := tr.Outcome
			if o.Status != transcript.Errored || o.Cause != transcript.CauseServer ||
				!strings.Contains(o.Detail, "notes-v2") || !strings.Contains(o.Detail, "mst auth notes-v2 -c") {
				b, _ := json.Marshal(o)
				t.Errorf("the connector variant's trial: %s; want errored, cause server, naming the server and mst auth", b)
			}
		case "plain":
			if tr.Outcome.Status != transcript.Answered {
				t.Errorf("the plain variant's trial: %+v, want answered", tr.Outcome)
			}
		}
		return nil
	})
	if seen != 2 {
		t.Errorf("%d transcripts, want 2", seen)
	}
	if strings.Contains(printed.String(), g.Token.RefreshToken) {
		t.Error("the log holds the refresh token")
	}
}

// TestConnectorTokenRejectedEarly: the MCP server refuses an access token
// that has not expired by its stated expiry (its clock is two hours ahead,
// as after a revocation on its side or a skewed clock). The worker reports
// the value rejected, the coordinator gets a new token although the old
// one looked fresh, the request goes again with it, and every trial
// passes.
func TestConnectorTokenRejectedEarly(t *testing.T) {
	t.Parallel()
	s := oauthtest.Start(t)
	creds, g := authorized(t, s, "notes-v2")
	s.Advance(2 * time.Hour) // the grant's one-hour token is dead to the server
	p, o, shards, _ := canaryRun(t, connectorEval(t, s.MCPURL(), 2, "model: offline"), secrets.New())
	tp := &taps{}
	o.Runner = chanTapped(runner.ProcessesDefinition(), tp)
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": shards}, Shards: 1, Keep: runner.KeepNever}
	o.Credentials = creds
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	allPassed(t, out)
	c := s.Counts()
	if c.MCPRefused == 0 || c.Refreshes != 1 {
		t.Errorf("counts %+v: want the old token refused, then one refresh", c)
	}
	got := tp.handedOut(t, p.ConnectorTokens()["notes-v2"])
	if len(got) != 2 || got[0] != g.Token.AccessToken || got[1] == got[0] {
		t.Errorf("the worker was handed %d values; want the stored token, then one new one", len(got))
	}
}

// allPassed checks that each variant of a connectorEval run graded and
// passed its five trials.
func allPassed(t *testing.T, out *run.Outcome) {
	t.Helper()
	if len(out.Report.Variants) == 0 {
		t.Error("the report has no variant")
	}
	for _, v := range out.Report.Variants {
		if v.Graded != 5 || v.Passed != 5 {
			t.Errorf("variant %s: %d of %d graded trials passed, want 5 of 5 (outcomes %+v)", v.Variant, v.Passed, v.Graded, v.Outcomes)
		}
	}
}
