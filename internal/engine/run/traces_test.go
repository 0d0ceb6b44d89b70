package run_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mst-eval/mst/internal/engine/traces/tracestest"
	"github.com/mst-eval/mst/secrets"
)

// TestRunTraces runs `mst run` (the binary, with shards in child workers)
// on the offline model and the MCP test server with OTEL_EXPORTER_OTLP_*
// set to a real OTLP receiver: when mst exits, the receiver holds one
// trace per trial, with the tool calls and model calls under it, the
// errored trial marked as an error, and no byte of any request holds a
// value of the secrets file, which the prompts carry into tool calls.
func TestRunTraces(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			// One word each, so the offline model puts them in the tool
			// arguments. The judge's key never reaches the worker, so the
			// transcript the coordinator gets still holds it.
			const canary, judgeKey = "zqcanary6b1d93x", "zqjudgekey40c2e8"
			r := tracestest.Start(t)
			endpoint := r.HTTP
			if proto == "grpc" {
				endpoint = r.GRPC
			}
			path := writeEval(t, map[string]string{
				"eval.yaml": `
name: traced
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  good: {model: offline, servers: [test]}
graders:
  - judge: {rubric: supported, model: offline, apiKeyEnv: JUDGE_KEY}
trials: 1
`,
				"cases.jsonl": `{"id": "echo", "input": "Echo the text back ` + judgeKey + `"}` + "\n" +
					`{"id": "fail", "input": "Fail on purpose with the reason ` + canary + `"}` + "\n" +
					`{"id": "crash", "input": "Crash the server process now, ` + canary + `"}` + "\n",
				"secrets.env": "CANARY=" + canary + "\nJUDGE_KEY=" + judgeKey + "\n",
			})
			dir := filepath.Dir(path)
			if err := os.Chmod(filepath.Join(dir, "secrets.env"), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(mstCommand, "run", path, "--results", filepath.Join(dir, "results"),
				"--secrets-file", filepath.Join(dir, "secrets.env"), "--runner", "processes",
				"--runner-option", "dir="+t.TempDir(), "--max-errored", "100%")
			cmd.Env = append(os.Environ(),
				"OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL="+proto,
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_SDK_DISABLED=", "OTEL_TRACES_EXPORTER=")
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			if err := cmd.Run(); err != nil {
				if _, ok := err.(*exec.ExitError); !ok {
					t.Fatal(err)
				}
				// A failing grade exits non-zero; the run itself is what counts.
			}
			if strings.Contains(stderr.String(), "traces") {
				t.Errorf("mst warned about traces:\n%s", stderr.String())
			}

			spans := r.Spans() // mst has exited: everything it sent is here
			set := secrets.New()
			set.Add("CANARY", canary)
			set.Add("JUDGE_KEY", judgeKey)
			for i, b := range r.Raw() {
				if !bytes.Equal(secrets.NewRedactor(set).Bytes(b), b) {
					t.Errorf("request %d holds a secret", i)
				}
			}
			trials := map[string]tracestest.Span{}
			kids := map[string][]tracestest.Span{}
			for _, s := range spans {
				if s.ParentID == "" {
					trials[s.Attrs["mst.variant"].(string)+"/"+s.Attrs["mst.case"].(string)] = s
				}
			}
			for _, s := range spans {
				if s.ParentID == "" {
					continue
				}
				for k, tr := range trials {
					if tr.SpanID == s.ParentID && tr.TraceID == s.TraceID {
						kids[k] = append(kids[k], s)
					}
				}
			}
			if len(trials) != 3 {
				t.Fatalf("%d trial spans, want 3 (one per case); mst said:\n%s\nspans: %+v", len(trials), stderr.String(), spans)
			}
			for k, tr := range trials {
				if tr.Name != "invoke_agent api" || tr.Attrs["gen_ai.operation.name"] != "invoke_agent" || tr.Attrs["gen_ai.request.model"] != "offline" ||
					tr.Attrs["mst.trial"] != int64(1) || !strings.HasPrefix(tr.Attrs["mst.run.id"].(string), "traced-") ||
					tr.Resource["service.name"] != "mst" || tr.Resource["service.version"] != testVersion {
					t.Errorf("trial %s: %s %v resource %v", k, tr.Name, tr.Attrs, tr.Resource)
				}
			}
			// echo and fail are answered (fail's tool answered with an
			// error); crash's server died under the call: the model is
			// told, as every client tells it, and the trial is errored
			// (server) because the proxy saw the server fail.
			for _, c := range []struct {
				key, tool, outcome string
				chats              int
				toolErr, trialErr  bool
			}{
				{"good/echo", "echo", "answered", 2, false, false},
				{"good/fail", "fail", "answered", 2, true, false},
				{"good/crash", "crash", "errored", 2, true, true},
			} {
				tr := trials[c.key]
				if tr.Attrs["mst.outcome"] != c.outcome || (tr.StatusCode == tracepb.Status_STATUS_CODE_ERROR) != c.trialErr {
					t.Errorf("trial %s: status %v %q, attributes %v", c.key, tr.StatusCode, tr.StatusMessage, tr.Attrs)
				}
				if c.trialErr && (tr.Attrs["error.type"] != "server" || tr.Attrs["mst.outcome.cause"] != "server") {
					t.Errorf("errored trial %s: attributes %v", c.key, tr.Attrs)
				}
				var chats, tools []tracestest.Span
				for _, s := range kids[c.key] {
					switch s.Attrs["gen_ai.operation.name"] {
					case "chat":
						chats = append(chats, s)
					case "execute_tool":
						tools = append(tools, s)
					}
				}
				if len(chats) != c.chats || len(tools) != 1 {
					t.Fatalf("trial %s has %d chat and %d tool spans, want %d and 1: %+v", c.key, len(chats), len(tools), c.chats, kids[c.key])
				}
				call := tools[0]
				if call.Name != "execute_tool "+c.tool || call.Attrs["gen_ai.tool.name"] != c.tool || call.Attrs["mcp.server.name"] != "test" ||
					call.Attrs["mcp.method.name"] != "tools/call" || call.Attrs["gen_ai.tool.call.id"] == "" || call.Attrs["network.transport"] != "pipe" {
					t.Errorf("trial %s: tool span %s %v", c.key, call.Name, call.Attrs)
				}
				if (call.StatusCode == tracepb.Status_STATUS_CODE_ERROR) != c.toolErr {
					t.Errorf("trial %s: tool span status %v %q", c.key, call.StatusCode, call.StatusMessage)
				}
				if call.Start.Before(tr.Start) || call.End.After(tr.End) || chats[0].End.After(call.Start) ||
					(len(chats) > 1 && chats[1].Start.Before(call.End)) {
					t.Errorf("trial %s: model calls %+v around the tool call %s..%s", c.key, chats, call.Start, call.End)
				}
			}
			if got := trials["good/echo"]; got.Attrs["mst.tool_calls"] != int64(1) {
				t.Errorf("echo: attributes %v", got.Attrs)
			}
			for _, s := range kids["good/echo"] {
				if s.Attrs["gen_ai.operation.name"] == "execute_tool" && s.Attrs["gen_ai.tool.call.arguments"] != `{"text":"[redacted:JUDGE_KEY]"}` {
					t.Errorf("echo's arguments in the span = %v; want them redacted", s.Attrs["gen_ai.tool.call.arguments"])
				}
			}
		})
	}
}
