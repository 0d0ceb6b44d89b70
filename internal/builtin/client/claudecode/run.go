package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin/client/cliproc"
	"github.com/mst-eval/mst/transcript"
)

// stderrTail bounds how much of the CLI's stderr a trial keeps.
const stderrTail = 4096

// Run runs one trial: one CLI process, read line by line. When ctx ends the
// CLI's tree is stopped and Run returns what the CLI had written, errored;
// MST decides whether that was a timeout or a cancellation.
func (s *session) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return client.Result{}, errors.New("the claude-code session is closed")
	}
	version := s.version
	if err := ctx.Err(); err != nil {
		return client.Result{ClientVersion: version, Outcome: ended(err)}, nil
	}

	tdir, err := os.MkdirTemp(s.dir, "trial-")
	if err != nil {
		return client.Result{}, fmt.Errorf("making the trial's folder: %w", err)
	}
	defer os.RemoveAll(tdir)
	home, work := filepath.Join(tdir, "home"), filepath.Join(tdir, "work")
	for _, d := range []string{filepath.Join(home, ".claude"), work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return client.Result{}, fmt.Errorf("making the trial's folder: %w", err)
		}
	}

	// The worker's proxies, when it set them, replace the session's
	// servers for this trial: their own MCP config, in the trial's folder.
	srvs, cfgPath := s.params.Servers, s.mcpConfig
	if t.Servers != nil {
		srvs = s.params.TrialServers(t)
		cfg, err := mcpConfig(srvs, s.unset)
		if err != nil {
			return client.Result{}, fmt.Errorf("the trial's MCP config: %w", err)
		}
		cfgPath = filepath.Join(tdir, "mcp.json")
		if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
			return client.Result{}, fmt.Errorf("writing the trial's MCP config: %w", err)
		}
	}

	var mu sync.Mutex
	var lines []line
	started := time.Now()
	proc, err := cliproc.Start(ctx, cliproc.Command{
		Path: s.cli, Args: s.args(cfgPath, srvs), Stdin: t.Prompt, Env: s.env(home), Dir: work,
		StderrTail: stderrTail, Started: s.started,
		Line: func(at time.Time, text []byte) {
			mu.Lock()
			lines = append(lines, line{at: at, text: text})
			mu.Unlock()
		},
	})
	if err != nil {
		return client.Result{ClientVersion: version, Outcome: transcript.Outcome{
			Status: transcript.Errored, Cause: transcript.CauseClient,
			Detail: fmt.Sprintf("starting the Claude Code CLI (%s): %v", s.cli, err),
		}}, nil
	}
	waitErr := proc.Wait()

	mu.Lock()
	res := parse(lines, t.Prompt, srvs, s.infos)
	mu.Unlock()
	res.ClientVersion = version
	if res.ClientTelemetry == nil {
		res.ClientTelemetry = map[string]any{}
	}
	res.ClientTelemetry["wall_ms"] = float64(time.Since(started).Microseconds()) / 1000
	if res.Servers == nil {
		res.Servers = s.infos
	}
	if err := ctx.Err(); err != nil {
		res.Outcome, res.Answer = ended(err), ""
		res.WaitingOn = waitingOn(lines)
		return res, nil
	}
	if res.Outcome.Status == "" {
		detail := "the Claude Code CLI ended without a result line"
		if waitErr != nil {
			detail = fmt.Sprintf("the Claude Code CLI failed (%v) without a result line", waitErr)
		}
		if tl := strings.TrimSpace(proc.Stderr()); tl != "" {
			detail += "; its stderr ends with: " + tl
		}
		res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: detail}
	}
	if res.Outcome.Status == transcript.Errored && res.Outcome.Cause == transcript.CauseServer {
		res.Next = client.Continue // the next trial starts its servers afresh
	}
	return res, nil
}

// ended is the outcome of a trial whose context ended (err) before the CLI
// answered: errored, for MST to classify as timed out or cancelled.
func ended(err error) transcript.Outcome {
	return transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: "the CLI was stopped before it answered: " + err.Error()}
}

// line is one stdout line of the CLI and when it arrived.
type line struct {
	at   time.Time
	text []byte
}

// waitingOn says what the CLI was waiting on after its last stdout line:
// the model after its init line, a user turn (tool results) or an
// assistant block that asks for no tool (more blocks of the same answer
// may follow); a tool after an assistant block that asks for one; nothing
// it can tell ("") before its init line or after its result.
func waitingOn(lines []line) string {
	state := ""
	for _, l := range lines {
		var sl streamLine
		if json.Unmarshal(l.text, &sl) != nil {
			continue
		}
		switch sl.Type {
		case "system", "user":
			state = transcript.WaitingModel
		case "assistant":
			state = transcript.WaitingModel
			if sl.Message != nil {
				for _, b := range sl.Message.Content {
					if b.Type == "tool_use" || b.Type == "server_tool_use" {
						state = transcript.WaitingTool
					}
				}
			}
		case "result":
			state = ""
		}
	}
	return state
}
