package run_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/secrets"
)

// TestNewPlanServerSecretRefs: a server's env and headers may refer to a
// secrets-file value by name; the plan keeps the reference, never the
// value, and a name the file does not set (or a malformed reference) fails
// the plan naming the file, the place and the name.
func TestNewPlanServerSecretRefs(t *testing.T) {
	t.Parallel()
	const value = "gh-secret-value-2026"
	tests := []struct {
		name, server, file string
		want               []string // parts of the error; nil: no error
	}{
		{"env", `{command: SERVER, env: {GITHUB_TOKEN: "${secret:GH_TOKEN}"}}`, "GH_TOKEN=" + value + "\n", nil},
		{"header", `{url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer ${secret:GH_TOKEN}"}}`, "GH_TOKEN=" + value + "\n", nil},
		{"unknown in env", `{command: SERVER, env: {GITHUB_TOKEN: "${secret:GH_TOKN}"}}`, "GH_TOKEN=" + value + "\n",
			[]string{"eval.yaml", "servers.test.env.GITHUB_TOKEN", "GH_TOKN", "secrets.env does not set it"}},
		{"unknown in a header", `{url: "http://127.0.0.1:1/mcp", headers: {X-Key: "k=${secret:NOPE}"}}`, "",
			[]string{"servers.test.headers.X-Key", "NOPE", "no --secrets-file"}},
		{"malformed", `{command: SERVER, env: {T: "${secret:GH TOKEN}"}}`, "GH_TOKEN=" + value + "\n",
			[]string{"servers.test.env.T", "malformed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeEval(t, map[string]string{
				"eval.yaml":   "name: refs\ndatasets: [cases.jsonl]\nservers:\n  test: " + tt.server + "\nvariants:\n  v: {model: offline}\n",
				"cases.jsonl": `{"id": "a", "input": "hi"}` + "\n",
			})
			req := planRequest(path)
			req.Secrets = secrets.New()
			if tt.file != "" {
				set, err := secrets.Parse("secrets.env", strings.NewReader(tt.file))
				if err != nil {
					t.Fatal(err)
				}
				req.Secrets, req.SecretsFile = set, "secrets.env"
			}
			p, err := run.NewPlan(t.Context(), req)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewPlan = %v", err)
				}
				for _, s := range p.Settings {
					for _, srv := range s.Servers {
						if strings.Contains(srv.Env["GITHUB_TOKEN"]+srv.Headers["Authorization"], value) || !strings.Contains(srv.Env["GITHUB_TOKEN"]+srv.Headers["Authorization"], "${secret:GH_TOKEN}") {
							t.Errorf("the plan's server %s holds %v %v, want the reference", srv.Name, srv.Env, srv.Headers)
						}
					}
				}
				return
			}
			if err == nil || !errors.Is(err, run.ErrInvalid) {
				t.Fatalf("NewPlan = %v, want an invalid-input error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewPlan error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
