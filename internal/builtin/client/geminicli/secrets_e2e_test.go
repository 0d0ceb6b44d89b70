//go:build linux

package geminicli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/peertest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// groupCmdlines returns the /proc cmdline of every process in process
// group pgid (the CLI, the copy of itself it starts, its servers).
func groupCmdlines(pgid int) map[int][]byte {
	out := map[int][]byte{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue
		}
		if f := strings.Fields(string(stat[i+1:])); len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out[pid], _ = os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		}
	}
	return out
}

// filesHolding walks dir and returns each file (but skip) that holds one
// of secrets, with the secret.
func filesHolding(dir, skip string, secrets ...string) []string {
	var found []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == skip {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				found = append(found, path+": "+s)
			}
		}
		return nil
	})
	return found
}

// TestCLIGetsOnlyItsKey runs the real CLI with a run secret it has no use
// for, a stdio server with a secret in its env and an HTTP server (the
// trial's own, as the worker's proxies are) that needs a secret header.
// While the CLI waits on the model (the first request, passed through a
// proxy to the fake provider) the test reads the argv of every process of
// the CLI's group, the CLI's environment and every file of the session's
// folder: the key is only in the environment, the other secret nowhere,
// no secret and not the prompt in any argv, and no secret in any file.
// The servers still get their secrets.
func TestCLIGetsOnlyItsKey(t *testing.T) {
	t.Parallel()
	const prompt, other = "canary-prompt-7f3a please answer", "canary-other-secret-51c9"
	const envSecret, headerSecret = "canary-server-env-3b7d$HOME", "canary-header-9e21"
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{ToolCalls: []providertest.Call{{Tool: "get-env"}, {Tool: "mcp_web_echo", Arguments: map[string]any{"text": "hi"}}}},
		{Text: "done"},
	}}}})

	// The HTTP server records the Authorization header it gets.
	var authMu sync.Mutex
	var auths []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testserver.New(true) }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authMu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		authMu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	everything := peertest.Everything(t)
	everything.Env = map[string]string{"MST_TEST_SERVER_SECRET": envSecret}
	web := servers.Server{Name: "web", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer " + headerSecret}}
	// The session's own servers: the trial replaces the HTTP one.
	placeholder := servers.Server{Name: "web", URL: "http://127.0.0.1:9/not-this-one"}

	var cmdlines map[int][]byte
	var found []string
	var s *session
	snoop := providertest.NewProcSnoop(t, fake.URL, func(pid int) {
		cmdlines = groupCmdlines(pid)
		found = filesHolding(s.dir, "", envSecret, headerSecret, other, testKey)
	})
	raw, _ := json.Marshal(map[string]any{"requestMaxAttempts": 1, "baseURL": snoop.URL, "command": peertest.Gemini(t)})
	cs, err := Open(t.Context(), client.OpenParams{
		Variant: "v", Model: "google/gemini-test-1", Options: raw, Servers: []servers.Server{everything, placeholder},
		Env:    map[string]string{"GEMINI_API_KEY": testKey, "OTHER_SECRET": other},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	s = cs.(*session)
	t.Cleanup(func() { s.Close() })
	s.onStart = func(pid int) { snoop.PID <- pid }
	if found := filesHolding(s.dir, "", envSecret, headerSecret, other, testKey); len(found) > 0 {
		t.Errorf("after Open, files hold secrets: %v", found)
	}
	ctx := t.Context()
	res, err := s.Run(ctx, client.Trial{Key: transcript.Key{Case: "c1", Variant: "v", Trial: 1}, Prompt: prompt, Servers: []servers.Server{everything, web}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "done" || len(res.ToolCalls) != 2 {
		t.Fatalf("answer %q, calls %+v, outcome %+v", res.Answer, res.ToolCalls, res.Outcome)
	}
	environ := snoop.Environ()
	if len(cmdlines) == 0 || len(environ) == 0 {
		t.Fatalf("the CLI's /proc files were not read (%d cmdlines, environ %d bytes)", len(cmdlines), len(environ))
	}
	for pid, cmd := range cmdlines {
		for _, s := range []string{"canary-"} {
			if bytes.Contains(cmd, []byte(s)) {
				t.Errorf("process %d's argv holds a canary: %q", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
			}
		}
		if bytes.Contains(cmd, []byte(testKey)) {
			t.Errorf("process %d's argv holds the key", pid)
		}
	}
	if len(found) > 0 {
		t.Errorf("while the CLI ran, files of the session held secrets: %v", found)
	}
	if !bytes.Contains(environ, []byte("GEMINI_API_KEY="+testKey)) {
		t.Errorf("the CLI's environment lacks its key")
	}
	if bytes.Contains(environ, []byte(other)) {
		t.Errorf("the CLI's environment carries a run secret it does not need")
	}
	// The servers got their secrets, and the stdio server nothing else.
	getEnv := res.ToolCalls[0]
	if getEnv.Server != "everything" || !strings.Contains(getEnv.Result, strconv.Quote(envSecret)) {
		t.Errorf("get-env = %+v, want the server's secret %q in its environment", getEnv, envSecret)
	}
	for _, leak := range []string{testKey, headerSecret, other, secretVarPrefix, dollarVar} {
		if strings.Contains(getEnv.Result, leak) {
			t.Errorf("the stdio server's environment holds %q", leak)
		}
	}
	if c := res.ToolCalls[1]; c.Server != "web" || c.IsError || !strings.Contains(c.Result, "hi") {
		t.Errorf("echo on the trial's HTTP server = %+v", c)
	}
	authMu.Lock()
	if len(auths) == 0 {
		t.Errorf("the trial's HTTP server got no request")
	}
	for _, a := range auths {
		if a != "Bearer "+headerSecret {
			t.Errorf("the HTTP server got Authorization %q, want the configured header", a)
		}
	}
	authMu.Unlock()
	reqs := fake.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[0].FirstUserText, prompt) {
		t.Errorf("the prompt did not reach the model")
	}
	if found := filesHolding(s.dir, "", envSecret, headerSecret, other, testKey); len(found) > 0 {
		t.Errorf("after the trial, files hold secrets: %v", found)
	}
}

// TestPromptUnderLoad runs trials at once while every core is busy, with
// prompts of several kinds (flags and shell syntax, many lines, one larger
// than a pipe's buffer, Unicode): each prompt reaches the model whole, and
// none is in the argv of any process of the CLI's group.
func TestPromptUnderLoad(t *testing.T) {
	t.Parallel()
	prompts := []string{
		"-p --yolo 'quoted' \"double\" $HOME `id` ; canary-load-0 & | >",
		"canary-load-1 first line\nsecond line\n\n  third, indented\n",
		strings.Repeat("canary-load-2 éß✓ 漢字 ", 8000),
		"@README.md /help canary-load-3",
	}
	stop := make(chan struct{})
	var burners sync.WaitGroup
	for range 2 * runtime.NumCPU() {
		burners.Add(1)
		go func() {
			defer burners.Done()
			for {
				select {
				case <-stop:
					return
				//lint:ignore SA5004 the loop spins on purpose: it loads the CPU
				default:
				}
			}
		}()
	}
	defer burners.Wait()
	defer close(stop)

	type outcome struct {
		res      client.Result
		err      error
		cmdlines map[int][]byte
		reqs     []providertest.Request
	}
	out := make([]outcome, len(prompts))
	var wg sync.WaitGroup
	for i, prompt := range prompts {
		fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: fmt.Sprintf("answer %d", i)}}}}})
		snoop := providertest.NewProcSnoop(t, fake.URL, func(pid int) { out[i].cmdlines = groupCmdlines(pid) })
		s := openTest(t, snoop.URL, "")
		s.onStart = func(pid int) { snoop.PID <- pid }
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := t.Context()
			out[i].res, out[i].err = s.Run(ctx, client.Trial{Key: transcript.Key{Case: strconv.Itoa(i), Variant: "v", Trial: 1}, Prompt: prompt})
			out[i].reqs = fake.Requests()
		}()
	}
	wg.Wait()
	for i, o := range out {
		if o.err != nil || o.res.Answer != fmt.Sprintf("answer %d", i) {
			t.Errorf("trial %d: err %v, outcome %+v, answer %q", i, o.err, o.res.Outcome, o.res.Answer)
			continue
		}
		if len(o.reqs) == 0 || !strings.Contains(o.reqs[0].FirstUserText, prompts[i]) {
			got := ""
			if len(o.reqs) > 0 {
				got = o.reqs[0].FirstUserText
			}
			t.Errorf("trial %d: the model got %.200q, want the prompt %.200q whole", i, got, prompts[i])
		}
		if len(o.cmdlines) == 0 {
			t.Errorf("trial %d: no argv was read", i)
		}
		for pid, cmd := range o.cmdlines {
			if bytes.Contains(cmd, []byte("canary-load")) {
				t.Errorf("trial %d: process %d's argv holds the prompt", i, pid)
			}
		}
	}
}
