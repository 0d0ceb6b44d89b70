package codexcli

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/provider/providertest"
)

// TestOfferedOwnTools pins what the docs say of the CLI's own tools
// (builtinTools): with none named, the real CLI offers the model the
// variant's MCP tools and, of its own, only alwaysOnTools, which no
// setting of the CLI turns off. When a new CLI offers a switch for them
// (or more tools of its own), this test says so.
func TestOfferedOwnTools(t *testing.T) {
	t.Parallel()
	srv := newToolServer(t, "tools", "")
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{Turns: []providertest.Turn{{Text: "done"}}}}})
	s := openTest(t, fake.URL, "", srv.Server)
	run(t, t.Context(), s, "hi")
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the provider got no request")
	}
	var own []string
	mcp := 0
	for _, n := range reqs[0].Tools {
		if strings.HasPrefix(n, "mcp__tools") {
			mcp++
			continue
		}
		own = append(own, n)
	}
	slices.Sort(own)
	if want := slices.Sorted(maps.Keys(alwaysOnTools)); !slices.Equal(own, want) {
		t.Errorf("the CLI offers its own tools %v with builtinTools unset; the docs say %v", own, want)
	}
	if mcp == 0 {
		t.Errorf("the CLI offers none of the server's tools: %v", reqs[0].Tools)
	}
}
