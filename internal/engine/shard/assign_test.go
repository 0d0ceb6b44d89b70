package shard_test

import (
	"testing"

	"github.com/mst-eval/mst/internal/engine/shard"
)

// TestAssignStable pins where cases go: fnv64a of the case ID, mod the
// shard count. docs/protocol.md quotes these values; a resumed run relies
// on them not changing between versions.
func TestAssignStable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		caseID string
		n      int
		want   int
	}{
		{"weather-today", 1, 0},
		{"weather-today", 2, 1},
		{"weather-today", 4, 3},
		{"weather-tomorrow", 4, 1},
		{"a", 4, 0},
		{"anything", 0, 0},
	}
	for _, tt := range tests {
		if got := shard.Assign(tt.caseID, tt.n); got != tt.want {
			t.Errorf("Assign(%q, %d) = %d, want %d", tt.caseID, tt.n, got, tt.want)
		}
	}
}
