package desktop_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/desktop"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/desktoptest"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/standin"
	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/testserver"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// fixture is one owned desktop with the stand-in app on it, as the
// desktop worker image makes one: MST_DESKTOP_OWNED, a restart command,
// a managed-settings file, and the stand-in's profile.
type fixture struct {
	t        *testing.T
	d        *desktoptest.Desktop
	dir      string
	settings string
	pidFile  string
	// providerFile holds the provider address the app starts with.
	providerFile string
	notes        string
	provider     *providertest.Server
	host         *mcpproxy.Host
	tools        servers.Server // the test server: echo, sleep, fail, crash
	many         servers.Server // 42 tools, Unicode and long names
	notesSrv     servers.Server // tools with every kind of annotation, that write files
	app          desktop.App
}

const origSettings = `{"note": "the machine's own settings"}`

func newFixture(t *testing.T, script providertest.Script) *fixture {
	d := desktoptest.Start(t)
	f := &fixture{t: t, d: d, dir: t.TempDir()}
	appPath, profPath, err := standin.Write(filepath.Join(f.dir, "app"))
	if err != nil {
		t.Fatal(err)
	}
	f.settings = filepath.Join(f.dir, "etc", "managed-settings.json")
	os.MkdirAll(filepath.Dir(f.settings), 0o755)
	if err := os.WriteFile(f.settings, []byte(origSettings), 0o644); err != nil {
		t.Fatal(err)
	}
	// The stand-in's profile, with this machine's paths.
	var prof map[string]any
	data, _ := os.ReadFile(profPath)
	json.Unmarshal(data, &prof)
	prof["settingsPath"] = f.settings
	prof["versionCommand"] = []string{desktoptest.Python, appPath, "--version"}
	data, _ = json.Marshal(prof)
	os.WriteFile(profPath, data, 0o644)

	f.provider = providertest.New(t, script)
	f.pidFile = filepath.Join(f.dir, "app.pid")
	// The restart command reads the provider's address from a file, so a
	// test can point the app at a provider that is down.
	f.providerFile = filepath.Join(f.dir, "provider-url")
	os.WriteFile(f.providerFile, []byte(f.provider.URL), 0o644)
	restart := filepath.Join(f.dir, "restart")
	os.WriteFile(restart, []byte(fmt.Sprintf(`#!/bin/sh
# Stop the app that runs, if any, then start it afresh.
if [ -f %[1]s ]; then
	pid=$(cat %[1]s)
	kill "$pid" 2>/dev/null
	timeout 10 tail --pid="$pid" -f /dev/null || kill -9 "$pid" 2>/dev/null
fi
ANTHROPIC_BASE_URL=$(cat %[2]s) ANTHROPIC_API_KEY=test-key setsid %[3]s %[4]s --settings %[5]s >>%[6]s 2>&1 </dev/null &
echo $! > %[1]s
`, f.pidFile, f.providerFile, desktoptest.Python, appPath, f.settings, filepath.Join(f.dir, "app.out"))), 0o755)
	t.Cleanup(f.stopApp)

	for k, v := range map[string]string{
		"DISPLAY": d.Display, "DBUS_SESSION_BUS_ADDRESS": d.BusAddr, "HOME": d.Home,
		"XDG_CONFIG_HOME": filepath.Join(d.Home, ".config"),
		desktop.OwnedEnv:  "1", desktop.RestartEnv: restart, desktop.ProfileEnv: profPath,
	} {
		t.Setenv(k, v)
	}

	f.notes = t.TempDir()
	f.tools = httpServer(t, "tools", nil, nil)
	f.many = httpServer(t, "many", nil, testserver.AddMany)
	// The notes server speaks only an older protocol version (2024-11-05).
	f.notesSrv = httpServer(t, "notes", &mcp.ServerOptions{SupportedProtocolVersions: []string{"2024-11-05"}}, func(s *mcp.Server) { testserver.AddNotes(s, f.notes) })
	var err2 error
	f.host, err2 = mcpproxy.NewHost()
	if err2 != nil {
		t.Fatal(err2)
	}
	t.Cleanup(func() { f.host.Close() })
	f.app = desktop.App{Client: "cowork", Product: "the stand-in"}
	return f
}

// httpServer is MST's MCP test server (echo, sleep, fail, crash, and what
// add adds) over streamable HTTP in this process.
func httpServer(t *testing.T, name string, opts *mcp.ServerOptions, add func(*mcp.Server)) servers.Server {
	s := testserver.NewWith(true, opts)
	if add != nil {
		add(s)
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return servers.Server{Name: name, URL: hs.URL}
}

func (f *fixture) stopApp() {
	data, err := os.ReadFile(f.pidFile)
	if err != nil {
		return
	}
	var pid int
	fmt.Sscan(string(data), &pid)
	if pid > 0 {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// open opens a session of variant on srvs, as the worker does for a
// client whose servers it proxies.
func (f *fixture) open(ctx context.Context, variant string, options map[string]any, srvs ...servers.Server) client.Session {
	f.t.Helper()
	decl := make([]servers.Server, len(srvs))
	for i, s := range srvs {
		decl[i] = s.Declaration()
	}
	opts, _ := json.Marshal(options)
	s, err := desktop.Open(ctx, f.app, client.OpenParams{
		Variant: variant, Model: "anthropic/claude-test-1", Options: opts, Servers: decl, Proxied: true,
		Logger: slog.New(slog.DiscardHandler), WorkDir: f.t.TempDir(),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// run runs one trial through fresh proxies, as the worker does, and
// returns the result, the proxies' record and Run's error.
func (f *fixture) run(ctx context.Context, s client.Session, prompt string, srvs ...servers.Server) (client.Result, mcpproxy.Evidence, error) {
	f.t.Helper()
	set, err := f.host.Open(ctx, srvs, mcpproxy.Options{Trial: prompt})
	if err != nil {
		f.t.Fatal(err)
	}
	defer set.Close()
	res, err := s.Run(ctx, client.Trial{Key: transcript.Key{Case: "c", Variant: "v", Trial: 1}, Prompt: prompt, Servers: set.Servers()})
	return res, set.Evidence(), err
}

func answered(t *testing.T, res client.Result, err error, answer string) {
	t.Helper()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome.Status != transcript.Answered || res.Answer != answer {
		t.Fatalf("outcome %+v, answer %q; want answered %q", res.Outcome, res.Answer, answer)
	}
}

// TestStandIn runs trials of one desktop session and a second variant's
// on the stand-in app, through MST's proxies, the way a desktop client's
// shard runs them: tool calls of every kind, a provider that fails, a
// hang, a crash, a stray window, the action budget, a variant with other
// tool descriptions, and the settings put back at the end.
func TestStandIn(t *testing.T) {
	f := newFixture(t, providertest.Script{Faults: []providertest.Fault{{Status: 500, Times: 1}}, Conversations: []providertest.Conversation{
		{Match: "echo please", Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"text": "héllo ✓ 世界"}}}},
			{Text: "The echo said: héllo ✓ 世界"},
		}},
		{Match: "fail please", Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "fail", Arguments: map[string]any{"reason": "on purpose"}}}},
			{Text: "The tool failed, as asked."},
		}},
		{Match: "many please", Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: testserver.UnicodeTool, Arguments: map[string]any{"city": "Łódź"}}, {Tool: testserver.LongTool}}},
			{Text: "Both answered."},
		}},
		{Match: "write please", Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: testserver.WriteNote, Arguments: map[string]any{"name": "todo", "text": "buy milk"}}, {Tool: testserver.TouchNote, Arguments: map[string]any{"name": "empty"}}}},
			{Text: "Written."},
		}},
		{Match: "shout please", Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "shout", Arguments: map[string]any{"text": "hey"}}}},
			{Text: "Shouted."},
		}},
		{Match: "three calls", Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"text": "1"}}}},
			{Text: "ok"},
		}},
		{Match: "", Turns: []providertest.Turn{{Text: "Plain answer."}}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	a := f.open(ctx, "a", nil, f.tools, f.many, f.notesSrv)
	srvs := []servers.Server{f.tools, f.many, f.notesSrv}

	t.Run("provider-fails", func(t *testing.T) {
		// The script's fault answers the first model request 500.
		res, _, err := f.run(ctx, a, "plain first", srvs...)
		if err != nil || res.Outcome.Status != transcript.Errored || !strings.Contains(res.Outcome.Detail, "500") {
			t.Fatalf("outcome %+v, %v", res.Outcome, err)
		}
		tel := res.ClientTelemetry
		if tel["preparedMs"] == nil || tel["automation"] != "at-spi" || tel["os"] != "linux" {
			t.Errorf("telemetry of the first trial: %v", tel)
		}
		// The app stays usable.
		res, _, err = f.run(ctx, a, "plain after the failure", srvs...)
		answered(t, res, err, "Plain answer.")
	})

	t.Run("tool-call", func(t *testing.T) {
		res, ev, err := f.run(ctx, a, "echo please", srvs...)
		answered(t, res, err, "The echo said: héllo ✓ 世界")
		if len(res.ToolCalls) != 1 || res.ToolCalls[0].Server != "tools" || res.ToolCalls[0].Tool != "echo" || !strings.Contains(res.ToolCalls[0].Result, "héllo ✓ 世界") {
			t.Fatalf("the app's account of its calls: %+v", res.ToolCalls)
		}
		if len(ev.Calls) != 1 || ev.Calls[0].Tool != "echo" || ev.Calls[0].Server != "tools" {
			t.Fatalf("the proxies' record: %+v", ev.Calls)
		}
		if res.Usage.InputTokens == 0 || res.ClientVersion != "1.0.0" {
			t.Errorf("usage %+v, version %q", res.Usage, res.ClientVersion)
		}
		roles := ""
		for _, m := range res.Messages {
			roles += m.Role + " "
		}
		if roles != "user assistant tool assistant " {
			t.Errorf("messages' roles: %s(%+v)", roles, res.Messages)
		}
		// The app's managed settings name MST's front, not the proxies.
		data, _ := os.ReadFile(f.settings)
		var set struct {
			MCPServers map[string]struct{ URL string }
		}
		if json.Unmarshal(data, &set) != nil || len(set.MCPServers) != 3 || set.MCPServers["notes"].URL == "" {
			t.Fatalf("managed settings: %s", data)
		}
	})

	t.Run("same-variant-no-restart", func(t *testing.T) {
		pid, _ := os.ReadFile(f.pidFile)
		res, _, err := f.run(ctx, a, "plain question", srvs...)
		answered(t, res, err, "Plain answer.")
		if res.ClientTelemetry["preparedMs"] != nil {
			t.Error("the app was prepared again for a trial of the same variant")
		}
		if again, _ := os.ReadFile(f.pidFile); !bytes.Equal(pid, again) {
			t.Error("the app was restarted between two trials of one variant")
		}
	})

	t.Run("tool-error", func(t *testing.T) {
		res, ev, err := f.run(ctx, a, "fail please", srvs...)
		answered(t, res, err, "The tool failed, as asked.")
		if len(res.ToolCalls) != 1 || !res.ToolCalls[0].IsError || len(ev.Calls) != 1 || !ev.Calls[0].IsError {
			t.Fatalf("calls %+v, record %+v", res.ToolCalls, ev.Calls)
		}
	})

	t.Run("many-tools", func(t *testing.T) {
		res, ev, err := f.run(ctx, a, "many please", srvs...)
		answered(t, res, err, "Both answered.")
		if len(ev.Calls) != 2 || ev.Calls[0].Tool != testserver.UnicodeTool || ev.Calls[1].Tool != testserver.LongTool || ev.Calls[0].Server != "many" {
			t.Fatalf("record %+v", ev.Calls)
		}
		reqs := f.provider.Requests()
		if n := len(reqs[len(reqs)-1].Tools); n < testserver.ManyTools+4 {
			t.Errorf("the app offered the model %d tools", n)
		}
	})

	t.Run("write-tool", func(t *testing.T) {
		res, ev, err := f.run(ctx, a, "write please", srvs...)
		answered(t, res, err, "Written.")
		// An annotated write and an unannotated one, on a server of an
		// older protocol version.
		if len(ev.Calls) != 2 || ev.Calls[0].Server != "notes" || ev.Calls[1].Tool != testserver.TouchNote {
			t.Fatalf("record %+v", ev.Calls)
		}
		if got, err := os.ReadFile(filepath.Join(f.notes, "todo")); err != nil || string(got) != "buy milk" {
			t.Fatalf("the write did not reach the server: %q, %v", got, err)
		}
		if _, err := os.Stat(filepath.Join(f.notes, "empty")); err != nil {
			t.Fatalf("the unannotated write did not reach the server: %v", err)
		}
	})

	t.Run("hang-then-reset", func(t *testing.T) {
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
		start := time.Now()
		res, _, err := f.run(tctx, a, "wait forever #standin:hang", srvs...)
		tcancel()
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("Run returned %s after its deadline", took)
		}
		if err == nil && res.Outcome.Status == transcript.Answered {
			t.Fatalf("a hung app answered: %+v", res)
		}
		if res.Next != client.Reset {
			t.Errorf("Next = %v after a hang", res.Next)
		}
		diag, err := a.(client.Diagnoser).Diagnose(ctx)
		if err != nil {
			t.Fatal(err)
		}
		shot, _ := diag["screenshot"].(map[string]any)
		raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(shot["data"]))
		if img, err := png.Decode(bytes.NewReader(raw)); err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("the diagnosis's screenshot: %v (%v)", err, diag["screenshotError"])
		}
		if diag["status"] != "working" || !strings.Contains(fmt.Sprint(diag["log"]), "prompt") || !strings.Contains(fmt.Sprint(diag["tree"]), "push button") {
			t.Errorf("diagnosis: status %v, log %q, tree %q", diag["status"], diag["log"], diag["tree"])
		}
		if err := a.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		res, _, err = f.run(ctx, a, "plain after the hang", srvs...)
		answered(t, res, err, "Plain answer.")
	})

	t.Run("crash-then-reset", func(t *testing.T) {
		res, _, err := f.run(ctx, a, "die now #standin:crash", srvs...)
		if err != nil || res.Outcome.Status != transcript.Errored || !strings.Contains(res.Outcome.Detail, "exited") || res.Next != client.Reset {
			t.Fatalf("outcome %+v, next %v, %v", res.Outcome, res.Next, err)
		}
		diag, _ := a.(client.Diagnoser).Diagnose(ctx)
		if !strings.Contains(fmt.Sprint(diag["app"]), "not on the accessibility bus") {
			t.Errorf("diagnosis after a crash: %v", diag["app"])
		}
		if err := a.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		res, _, err = f.run(ctx, a, "plain after the crash", srvs...)
		answered(t, res, err, "Plain answer.")
	})

	t.Run("stray-window", func(t *testing.T) {
		res, _, err := f.run(ctx, a, "then an update prompt #standin:stray", srvs...)
		answered(t, res, err, "Plain answer.")
		// The stray window is open now, blocking the app: the next trial
		// closes it and still gets its prompt through.
		res, _, err = f.run(ctx, a, "plain with a stray open", srvs...)
		answered(t, res, err, "Plain answer.")
		if fmt.Sprint(res.ClientTelemetry["strayWindows"]) != "[Update available]" {
			t.Errorf("stray windows: %v", res.ClientTelemetry["strayWindows"])
		}
	})

	t.Run("max-actions", func(t *testing.T) {
		s := f.open(ctx, "a", map[string]any{"maxActions": 2}, f.tools, f.many, f.notesSrv)
		defer s.Close()
		res, _, err := f.run(ctx, s, "three calls", srvs...)
		if err != nil || res.Outcome.Status != transcript.NoAnswer || !strings.Contains(res.Outcome.Detail, "maxActions") {
			t.Fatalf("outcome %+v, %v", res.Outcome, err)
		}
	})

	t.Run("native-in-telemetry", func(t *testing.T) {
		// ChatGPT's own record stays in the client telemetry.
		saved := f.app
		f.app.NativeInTelemetry = true
		s := f.open(ctx, "a", nil, f.tools, f.many, f.notesSrv)
		f.app = saved
		defer s.Close()
		res, _, err := f.run(ctx, s, "echo please", srvs...)
		answered(t, res, err, "The echo said: héllo ✓ 世界")
		native, _ := res.ClientTelemetry["native"].(map[string]any)
		msgs, _ := native["messages"].([]any)
		if len(msgs) != 4 || len(res.Messages) != 2 || res.Messages[1].Text != "The echo said: héllo ✓ 世界" || len(res.ToolCalls) != 0 {
			t.Fatalf("telemetry's record %v; messages %+v; calls %+v", native, res.Messages, res.ToolCalls)
		}
	})

	t.Run("provider-down", func(t *testing.T) {
		// Nothing listens at the address the app gets: the trial errors
		// promptly with the app's own report.
		os.WriteFile(f.providerFile, []byte("http://127.0.0.1:1"), 0o644)
		defer os.WriteFile(f.providerFile, []byte(f.provider.URL), 0o644)
		s := f.open(ctx, "a", nil, f.tools, f.many, f.notesSrv)
		defer s.Close()
		tctx, tcancel := context.WithTimeout(ctx, time.Minute)
		defer tcancel()
		res, _, err := f.run(tctx, s, "plain while the provider is down", srvs...)
		if err != nil || res.Outcome.Status != transcript.Errored || !strings.Contains(res.Outcome.Detail, "provider") || tctx.Err() != nil {
			t.Fatalf("outcome %+v, %v", res.Outcome, err)
		}
	})

	t.Run("other-variant", func(t *testing.T) {
		desc := "Shout the text back, loudly."
		renamed := f.tools
		renamed.Tools = map[string]servers.ToolOverride{"echo": {Name: "shout", Description: &desc}}
		b := f.open(ctx, "b", nil, renamed)
		defer b.Close()
		res, ev, err := f.run(ctx, b, "shout please", renamed)
		answered(t, res, err, "Shouted.")
		if res.ClientTelemetry["preparedMs"] == nil {
			t.Error("the app was not prepared for another variant")
		}
		if len(ev.Calls) != 1 || ev.Calls[0].Tool != "echo" {
			t.Fatalf("the server got %+v", ev.Calls)
		}
		reqs := f.provider.Requests()
		last := reqs[len(reqs)-1]
		if !strings.Contains(string(last.Body), desc) || strings.Contains(string(last.Body), "write_note") {
			t.Errorf("the model was not offered variant b's tools: %v", last.Tools)
		}
		// Back to variant a: prepared again, with its own servers.
		res, _, err = f.run(ctx, a, "echo please", srvs...)
		answered(t, res, err, "The echo said: héllo ✓ 世界")
		if res.ClientTelemetry["preparedMs"] == nil {
			t.Error("the app kept variant b's settings for a trial of a")
		}
	})

	data, _ := os.ReadFile(f.pidFile)
	var appPID int
	fmt.Sscan(string(data), &appPID)
	if appPID <= 0 || syscall.Kill(appPID, 0) != nil {
		t.Fatalf("the app MST started (pid file %q) is not running before the last session closes", data)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The last session out stopped the app MST started: Close returned
	// only once it had ended (a zombie, not yet reaped by its parent
	// shell, counts as ended).
	if alive(appPID) {
		t.Errorf("the app MST started (pid %d) still runs after the last session closed", appPID)
	}
	if got, _ := os.ReadFile(f.settings); string(got) != origSettings {
		t.Errorf("the managed settings were not put back: %s", got)
	}
	if _, err := os.Stat(f.settings + ".mst-kept"); err == nil {
		t.Error("the kept copy of the settings is still there")
	}
}

// TestRefusals: a Linux desktop client opens only on an owned desktop
// and with a whole profile, and says how to get one.
func TestRefusals(t *testing.T) {
	app := desktop.App{Client: "cowork", Product: "Claude Desktop", Linux: desktop.Profile{App: "claude"}}
	p := client.OpenParams{Logger: slog.New(slog.DiscardHandler)}
	t.Setenv(desktop.OwnedEnv, "")
	_, err := desktop.Open(t.Context(), app, p)
	if err == nil || !strings.Contains(err.Error(), "MST_DESKTOP_OWNED=1") || !strings.Contains(err.Error(), "--desktop") {
		t.Fatalf("not owned: %v", err)
	}
	t.Setenv(desktop.OwnedEnv, "1")
	_, err = desktop.Open(t.Context(), app, p)
	if err == nil || !strings.Contains(err.Error(), "lacks answerMarker, conversation") {
		t.Fatalf("a partial profile: %v", err)
	}
	prof := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(prof, []byte(`{"app": "x", "windw": "typo"}`), 0o644)
	t.Setenv(desktop.ProfileEnv, prof)
	_, err = desktop.Open(t.Context(), app, p)
	if err == nil || !strings.Contains(err.Error(), "windw") || !strings.Contains(err.Error(), prof) {
		t.Fatalf("a profile with a typo: %v", err)
	}
}

// alive reports whether process pid runs (exists and is not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S …".
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
