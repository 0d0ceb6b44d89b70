//go:build unix

package geminicli

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/transcript"
)

// lossyCLI writes a program that answers like the CLI in headless mode,
// but loses its standard input, as the CLI does when the prompt comes too
// late, on its first losses runs. Its answer is the prompt it read.
func lossyCLI(t *testing.T, losses int) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gemini")
	count := filepath.Join(dir, "runs")
	script := `#!/bin/sh
if [ "$1" = --version ]; then echo 0.61.0; exit 0; fi
echo x >> ` + count + `
if [ "$(wc -l < ` + count + `)" -le ` + strconv.Itoa(losses) + ` ]; then
  echo '` + noInput + `. Input can be provided by piping data into gemini or using the --prompt option.' >&2
  exit 1
fi
prompt=$(cat)
echo '{"type":"init","session_id":"s"}'
printf '{"type":"message","role":"assistant","content":"%s"}\n' "$prompt"
echo '{"type":"result","status":"success"}'
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPromptLostRetried: a CLI that read no prompt is started again, up to
// promptAttempts times in all; after that the trial ends errored, saying
// why.
func TestPromptLostRetried(t *testing.T) {
	t.Parallel()
	for losses := 0; losses <= promptAttempts; losses++ {
		raw, _ := json.Marshal(map[string]any{"command": lossyCLI(t, losses)})
		cs, err := Open(t.Context(), client.OpenParams{
			Variant: "v", Model: "google/gemini-test-1", Options: raw,
			Env: map[string]string{"GEMINI_API_KEY": testKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		res := run(t, t.Context(), cs, "the prompt")
		cs.Close()
		if losses < promptAttempts {
			if res.Outcome.Status != transcript.Answered || res.Answer != "the prompt" {
				t.Errorf("%d losses: outcome %+v, answer %q; want the prompt answered", losses, res.Outcome, res.Answer)
			}
			if got, _ := res.ClientTelemetry["promptAttempts"].(int); (losses == 0 && got != 0) || (losses > 0 && got != losses+1) {
				t.Errorf("%d losses: telemetry %v", losses, res.ClientTelemetry)
			}
			continue
		}
		if res.Outcome.Status != transcript.Errored || !strings.Contains(res.Outcome.Detail, noInput) || res.ClientTelemetry["promptAttempts"] != promptAttempts {
			t.Errorf("%d losses: outcome %+v, telemetry %v; want errored after %d attempts", losses, res.Outcome, res.ClientTelemetry, promptAttempts)
		}
	}
}
