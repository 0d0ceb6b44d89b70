package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/testkit/oauthtest"
	"github.com/mst-eval/mst/internal/testkit/testbin"
)

// connectorSetup is an authorization server with its MCP server, an eval
// whose one server is that connector server (a preregistered client whose
// secret is in a secrets file), and a local credential store in which
// `mst auth` has stored the grant, as a user would have done.
type connectorSetup struct {
	srv                       *oauthtest.Server
	dir, eval, secrets, store string
	grant                     credstore.Grant
}

func (c *connectorSetup) storeArgs() []string {
	return []string{"--store-option", "dir=" + c.store, "--store-option", "key-file=" + filepath.Join(c.dir, "credentials.key")}
}

func newConnectorSetup(t *testing.T) *connectorSetup {
	t.Helper()
	c := &connectorSetup{srv: oauthtest.Start(t), dir: t.TempDir()}
	c.store = filepath.Join(c.dir, "credentials")
	c.secrets = filepath.Join(c.dir, "secrets.env")
	if err := os.WriteFile(c.secrets, []byte("NOTES_CLIENT_SECRET="+c.srv.ClientSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.eval = writeConnectorEval(t, c.dir, c.srv, "connector", "")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"auth", "notes", "-c", c.eval, "--secrets-file", c.secrets}, c.storeArgs()...)
	code := cli.Main(t.Context(), args, cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr,
		Env: append(os.Environ(), "BROWSER="+exe, testBrowserEnv+"=1")})
	if code != 0 {
		t.Fatalf("mst auth: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	st, err := credstore.OpenLocal(c.store, filepath.Join(c.dir, "credentials.key"))
	if err != nil {
		t.Fatal(err)
	}
	if c.grant, err = st.Get(t.Context(), "notes"); err != nil {
		t.Fatalf("after mst auth: %v", err)
	}
	if c.grant.Token == nil || c.grant.Token.RefreshToken == "" {
		t.Fatal("mst auth stored no refresh token")
	}
	return c
}

// writeConnectorEval writes, in dir, the eval name whose one server is
// srv's connector server (its preregistered client, the secret
// NOTES_CLIENT_SECRET) with four cases, three that echo and one that
// writes a note, and returns its path; extra is added to the config.
func writeConnectorEval(t *testing.T, dir string, srv *oauthtest.Server, name, extra string) string {
	t.Helper()
	var cases strings.Builder
	for i, id := range []string{"a", "über-🦉", strings.Repeat("長", 60)} {
		fmt.Fprintf(&cases, `{"id": %q, "input": "Please echo 'word %d'", "expect": [{"toolCalled": "echo"}]}`+"\n", id, i)
	}
	cases.WriteString(`{"id": "note", "input": "Write a note", "expect": [{"toolCalled": "write_note"}]}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(cases.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "eval.yaml")
	cfg := fmt.Sprintf(`name: %s
datasets: [cases.jsonl]
servers:
  notes:
    url: %s
    oauth: {clientId: %q, clientSecret: "${secret:NOTES_CLIENT_SECRET}"}
    writes: [write_note]
variants:
  v: {model: offline}
limits: {concurrency: 2}
%s`, name, srv.MCPURL(), srv.ClientID(), extra)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runConnector runs `mst run` with the program mst (not this process, so
// that workers are real mst processes) and checks that every trial
// passed and that no stored byte and nothing printed holds the grant's
// secrets.
func (c *connectorSetup) runConnector(t *testing.T, mst string, extra ...string) (runID string) {
	t.Helper()
	results := t.TempDir()
	args := append([]string{"run", c.eval, "--json", "--results", results}, c.storeArgs()...)
	cmd := exec.Command(mst, append(args, extra...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mst run %s: %v\n%s", strings.Join(extra, " "), err, stderr.String())
	}
	var rep struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
		Variants []struct {
			Variant string `json:"variant"`
			Graded  int    `json:"graded"`
			Passed  int    `json:"passed"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the report: %v\n%s", err, stdout.String())
	}
	if len(rep.Variants) != 1 || rep.Variants[0].Graded != 4 || rep.Variants[0].Passed != 4 {
		t.Errorf("report %+v: want the 4 trials graded and passed\n%s", rep.Variants, stderr.String())
	}
	canaries := map[string]string{"refresh token": c.grant.Token.RefreshToken, "client secret": c.grant.ClientSecret}
	for what, v := range canaries {
		if strings.Contains(stdout.String()+stderr.String(), v) {
			t.Errorf("mst run printed the %s", what)
		}
	}
	canaries["access token"] = c.grant.Token.AccessToken
	filepath.WalkDir(results, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		for what, v := range canaries {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds the %s", path, what)
			}
		}
		return nil
	})
	return rep.Run.ID
}

// TestConnectorAfterAuth: after `mst auth`, an eval with a connector
// server runs locally and on processes workers, its write tool included.
func TestConnectorAfterAuth(t *testing.T) {
	t.Parallel()
	c := newConnectorSetup(t)
	bin, err := testbin.Build(testbin.Options{Version: "0.0.0-connector"}, testbin.MST)
	if err != nil {
		t.Fatal(err)
	}
	mst := testbin.Path(bin, testbin.MST)
	t.Run("local", func(t *testing.T) { c.runConnector(t, mst) })
	t.Run("processes", func(t *testing.T) {
		c.runConnector(t, mst, "--runner", "processes", "--runner-option", "dir="+t.TempDir(), "--runner-option", "shards=2")
	})
	if n := len(c.srv.Notes()); n != 1 {
		t.Errorf("the server holds %d notes, want the one note both runs wrote", n)
	}
}

// TestConnectorNoGrant: a run whose connector server has no grant is
// refused before it starts, with the mst auth command to run.
func TestConnectorNoGrant(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(`{"id": "c", "input": "Please echo 'x'"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte("name: nogrant\ndatasets: [cases.jsonl]\nservers:\n  notes-v2: {url: 'http://127.0.0.1:1/mcp', oauth: {}}\nvariants:\n  v: {model: offline}\n"), 0o644)
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"run", filepath.Join(dir, "eval.yaml"), "--results", filepath.Join(dir, "results"), "--store-option", "dir=" + filepath.Join(dir, "creds"), "--store-option", "key-file=" + filepath.Join(dir, "key")},
		cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr, Env: os.Environ()})
	if code != int(cli.ExitUsage) || !strings.Contains(stderr.String(), "mst auth notes-v2 -c ") {
		t.Errorf("exit %d, stderr %q; want exit %d and the mst auth command", code, stderr.String(), cli.ExitUsage)
	}
	if _, err := os.Stat(filepath.Join(dir, "results")); err == nil {
		t.Error("the refused run left a results folder")
	}
}

// testDockerConnector: after `mst auth`, the eval runs on docker workers
// (on the host's network, where the test servers listen): each container
// gets access tokens over its channel and reaches the connector server
// with them.
func testDockerConnector(t *testing.T, tools string) {
	c := newConnectorSetup(t)
	mst := filepath.Join(tools, "mst")
	// The containers are kept, to read their command lines and
	// environments afterwards.
	id := c.runConnector(t, mst, "--runner", "docker", "--runner-option", "network=host", "--runner-option", "shards=2", "--runner-option", "keep=always")
	if n := c.srv.Counts().MCPAccepted; n == 0 {
		t.Error("the connector server accepted no request")
	}
	defer func() {
		if out, err := exec.Command(mst, "runner", "cleanup", id, "--runner", "docker").CombinedOutput(); err != nil {
			t.Errorf("mst runner cleanup %s: %v\n%s", id, err, out)
		}
	}()
	ids, err := exec.Command("docker", "ps", "-aq", "--filter", "label=mst.run="+id).Output()
	if err != nil || len(strings.Fields(string(ids))) != 2 {
		t.Fatalf("docker ps for run %s: %q, %v; want its two kept containers", id, ids, err)
	}
	inspect, err := exec.Command("docker", append([]string{"inspect"}, strings.Fields(string(ids))...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]string{"refresh token": c.grant.Token.RefreshToken, "client secret": c.grant.ClientSecret, "access token": c.grant.Token.AccessToken} {
		if bytes.Contains(inspect, []byte(v)) {
			t.Errorf("a container's configuration (argv, environment, labels) holds the %s", what)
		}
	}
}
