//go:build linux

package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/builtin/credstore/bucketcreds"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/testkit/oauthtest"
)

// TestDetachConnector runs a detached run whose one server is an OAuth
// connector server, end to end: mst auth keeps the grant in the bucket
// credential store (in the results bucket of the GCS emulator, sealed with
// the key from the secrets file); the access token has expired by the
// time the run starts and the authorization server rotates refresh
// tokens, so the coordinator must refresh the grant and store the new
// refresh token back. Every trial passes with the connector's tools, the
// store holds the rotated grant, and no process (workers, servers,
// clients, the coordinator itself) ever holds the store's key or a
// refresh token in its environment or argv, nor does any object of the
// bucket in clear.
func TestDetachConnector(t *testing.T) {
	d := newDetached(t, quickCases, quickOrder())
	srv := oauthtest.Start(t)
	key := credstore.NewKey()
	os.WriteFile(d.secrets, []byte("NOTES_CLIENT_SECRET="+srv.ClientSecret()+"\n"+credstore.KeySecret+"="+key+"\n"), 0o600)
	d.eval = writeConnectorEval(t, d.dir, srv, "detached", "results: "+d.results+"\n")

	// mst auth, as a person would, into the bucket store by default
	// under the results store.
	exe, _ := os.Executable()
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"auth", "notes", "-c", d.eval, "--secrets-file", d.secrets, "--store", "bucket"},
		cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr, Env: append(os.Environ(), "BROWSER="+exe, testBrowserEnv+"=1")})
	if code != 0 {
		t.Fatalf("mst auth --store bucket: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	aead, err := credstore.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := bucketcreds.Open(t.Context(), d.results+"/"+bucketcreds.DefaultFolder, aead)
	if err != nil {
		t.Fatal(err)
	}
	before, err := creds.Get(t.Context(), "notes")
	if err != nil {
		t.Fatalf("the grant mst auth stored: %v", err)
	}
	list := runCLI(t, "auth", "list", "-c", d.eval, "--secrets-file", d.secrets, "--store", "bucket", "--json")
	if want := `"location": "` + d.results + "/" + bucketcreds.DefaultFolder + `"`; list.code != 0 || !strings.Contains(list.stdout, `"server": "notes"`) || !strings.Contains(list.stdout, want) {
		t.Errorf("mst auth list --store bucket --json exited %d, want the grant and %s:\n%s%s", list.code, want, list.stdout, list.stderr)
	}
	srv.SetRotation(true)
	srv.Advance(2 * time.Hour) // the access token mst auth got has expired

	// Watch every process's environment and argv while the run goes.
	var seenMu sync.Mutex
	seen := map[string][]byte{}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var watched sync.WaitGroup
	watched.Go(func() {
		for watchCtx.Err() == nil {
			procs, _ := filepath.Glob("/proc/[0-9]*")
			for _, p := range procs {
				for _, f := range []string{"environ", "cmdline"} {
					if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && len(b) > 0 {
						seenMu.Lock()
						seen[p+"/"+f+"\x00"+string(b[:min(len(b), 64)])] = b
						seenMu.Unlock()
					}
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	shards := t.TempDir()
	id := d.launch("run", d.eval, "--store", "bucket", "--runner", "processes", "--runner-option", "shards=2", "--runner-option", "dir="+shards)
	w := d.watch(id)
	stopWatch()
	watched.Wait()
	if w.code != 0 {
		t.Fatalf("mst runs watch exited %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	s := d.status(id, time.Time{})
	if s["store"] != "bucket" {
		t.Errorf("the status records store %v, want bucket (a resume hint gives it again)", s["store"])
	}
	if s["state"] != "done" || s["collected"] != 4.0 {
		t.Fatalf("status = %v; want done with the 4 trials collected", s)
	}
	rep := d.report(s["run"].(string))
	variants, _ := rep["variants"].([]any)
	if len(variants) != 1 || variants[0].(map[string]any)["passed"] != 4.0 {
		t.Errorf("the report's variants = %v; want the 4 trials passed", variants)
	}
	if n := len(srv.Notes()); n != 1 {
		t.Errorf("the connector server holds %d notes, want the one the run wrote", n)
	}

	after, err := creds.Get(t.Context(), "notes")
	if err != nil {
		t.Fatal(err)
	}
	if c := srv.Counts(); c.Refreshes == 0 {
		t.Errorf("the authorization server saw no refresh: %+v", c)
	}
	if after.Refreshed.IsZero() || after.Token.RefreshToken == before.Token.RefreshToken {
		t.Errorf("the shared store's grant was not refreshed and rotated by the coordinator (refreshed %v)", after.Refreshed)
	}
	for _, v := range []string{key, before.Token.RefreshToken, after.Token.RefreshToken} {
		for k, b := range seen {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds the store's key or a refresh token", strings.SplitN(k, "\x00", 2)[0])
			}
		}
	}
	// The watch saw the run's processes: its coordinator and a worker.
	saw := map[string]bool{}
	for k, b := range seen {
		if strings.HasSuffix(strings.SplitN(k, "\x00", 2)[0], "/cmdline") {
			for _, what := range []string{"coordinate", "collect"} {
				if bytes.Contains(b, []byte("\x00"+what)) {
					saw[what] = true
				}
			}
		}
	}
	if !saw["coordinate"] || !saw["collect"] {
		t.Errorf("the watch saw the coordinator %v and a worker %v; want both", saw["coordinate"], saw["collect"])
	}
	for _, k := range listKeys(t, d.bucket, "") {
		data, err := d.bucket.ReadAll(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range map[string]string{"the store's key": key, "a refresh token": after.Token.RefreshToken, "the client secret": srv.ClientSecret(), "an access token": after.Token.AccessToken} {
			if bytes.Contains(data, []byte(v)) {
				t.Errorf("the bucket's %s holds %s in clear", k, what)
			}
		}
	}
	logs := runCLI(t, "runs", "logs", id, "-c", d.eval, "--results", d.results)
	if strings.Contains(logs.stdout+logs.stderr, key) || strings.Contains(logs.stdout, after.Token.RefreshToken) {
		t.Error("the detached run's log holds the key or the refresh token")
	}
}
