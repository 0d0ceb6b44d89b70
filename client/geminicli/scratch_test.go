package geminicli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/peertest"
	"github.com/mst-eval/mst/provider/providertest"
)

func TestScratch(t *testing.T) {
	bin := peertest.Gemini(t)
	srv := peertest.Everything(t)
	srv.Command = os.Getenv("SCRATCH_CMD")
	var faults []providertest.Fault
	if os.Getenv("SCRATCH_500") != "" {
		faults = []providertest.Fault{{Status: 500, Times: 100, Message: "boom"}}
	}
	fake := providertest.New(t, providertest.Script{Faults: faults, Conversations: []providertest.Conversation{{Turns: []providertest.Turn{
		{Text: "Let me echo that.", ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "hello from mst"}}}, InputTokens: 100, OutputTokens: 20},
		{Text: "The server echoed: hello from mst", InputTokens: 150, OutputTokens: 10},
	}}}})
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".gemini"), 0o700)
	settings := map[string]any{
		"mcpServers": map[string]any{"everything": map[string]any{"command": srv.Command, "args": srv.Args}},
		"telemetry": map[string]any{"enabled": false},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"general":   map[string]any{"disableAutoUpdate": true, "maxAttempts": 2},
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
	}
	b, _ := json.Marshal(settings)
	os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), b, 0o600)
	work := t.TempDir()
	cmd := exec.Command(bin, "-p", "Please echo 'hello from mst'", "--output-format", "stream-json", "-m", "gemini-test-1", "--yolo")
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + filepath.Dir(peertest.Node(t)) + ":/usr/bin:/bin", "HOME=" + home, "GOOGLE_GEMINI_BASE_URL=" + fake.URL, "GEMINI_API_KEY=dummy", "GEMINI_CLI_TRUST_WORKSPACE=true"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("took %v err %v\n%s", time.Since(start), err, out)
	for _, r := range fake.Requests() {
		t.Logf("req %s %s %s turn %d tools %v first %q status %d", r.Format, r.Path, r.Query, r.Turn, r.Tools, r.FirstUserText, r.Status)
	}
	if rs := fake.Requests(); len(rs) > 1 {
		t.Logf("body2: %s", rs[1].Body)
	}
}
