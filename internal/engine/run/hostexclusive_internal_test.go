package run

import (
	"testing"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/shard"
)

// TestHostExclusive: a run whose settings include cowork asks its runner
// for one machine at a time per host; one without does not.
func TestHostExclusive(t *testing.T) {
	reg := builtin.Clients()
	for _, tc := range []struct {
		clients []string
		want    bool
	}{
		{[]string{"api"}, false},
		{[]string{"api", "chatgpt", "codex-app"}, false},
		{[]string{"api", "cowork"}, true},
		{[]string{"nosuch"}, false},
	} {
		p := &Plan{}
		for _, c := range tc.clients {
			p.Settings = append(p.Settings, shard.Setting{Variant: c, Client: c})
		}
		if got := p.hostExclusive(reg); got != tc.want {
			t.Errorf("hostExclusive(%v) = %v, want %v", tc.clients, got, tc.want)
		}
	}
	if (&Plan{}).hostExclusive(nil) {
		t.Error("hostExclusive with no registry")
	}
}
