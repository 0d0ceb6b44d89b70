package eval

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServerCallsLimits checks limits.serverCalls as limits.servers is
// checked: a server that is not declared is refused with a suggestion, a
// cap must be a whole number of at least 1, and a valid one loads.
func TestServerCallsLimits(t *testing.T) {
	t.Parallel()
	got := loadErrors(t, "eval.yaml", head+`variants: {v: {model: offline}}
limits:
  serverCalls: {wether: 1, weather: 0, other: x}
`)
	want := []string{
		`eval.yaml:7:17: limits.serverCalls.wether: unknown server "wether" (did you mean weather?)`,
		"eval.yaml:7:28: limits.serverCalls.weather: must be at least 1, got number 0",
		`eval.yaml:7:40: limits.serverCalls.other: must be an integer, got string "x"`,
		`eval.yaml:7:40: limits.serverCalls.other: unknown server "other" (known: weather)`,
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(limits.serverCalls) errors mismatch (-want +got):\n%s", diff)
	}

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"eval.yaml": head + "variants: {v: {model: offline}}\nlimits: {serverCalls: {weather: 2}}\n", "cases.jsonl": "{}\n"})
	cfg, err := Load(filepath.Join(dir, "eval.yaml"), fakeCatalog{})
	if err != nil {
		t.Fatalf("Load(limits.serverCalls.weather: 2) = %v, want no error", err)
	}
	if got := cfg.Limits.ServerCalls; !cmp.Equal(got, map[string]int{"weather": 2}) {
		t.Errorf("Limits.ServerCalls = %v, want map[weather:2]", got)
	}
}
