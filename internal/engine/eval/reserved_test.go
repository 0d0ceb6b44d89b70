package eval

import (
	"strings"
	"testing"

	"github.com/mst-eval/mst/client"
)

// TestReservedServerName: a server may not be named as the server under
// which transcripts record a client's built-in tools, whatever its
// transport; the error names the place and says how to fix it.
func TestReservedServerName(t *testing.T) {
	t.Parallel()
	if ReservedServer != client.BuiltinServer {
		t.Fatalf("eval.ReservedServer = %q, client.BuiltinServer = %q: they must be the same name", ReservedServer, client.BuiltinServer)
	}
	for _, server := range []string{
		"{command: mcp-testserver}",
		`{url: "http://127.0.0.1:1/mcp"}`,
	} {
		lines := loadErrors(t, "eval.yaml", "name: r\ndatasets: [cases.jsonl]\nservers:\n  builtin: "+server+"\nvariants:\n  v: {model: offline}\n")
		found := false
		for _, l := range lines {
			if strings.Contains(l, "eval.yaml:4:") && strings.Contains(l, "servers.builtin") && strings.Contains(l, "reserved") && strings.Contains(l, "rename") {
				found = true
			}
		}
		if !found {
			t.Errorf("server builtin %s: errors %q, want one at eval.yaml:4 naming servers.builtin as reserved and saying to rename it", server, lines)
		}
	}
}
