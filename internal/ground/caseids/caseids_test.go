package caseids_test

import (
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/ground/caseids"
)

func TestMake(t *testing.T) {
	t.Parallel()
	for _, class := range caseids.Classes {
		ids := caseids.Make(class, 200, 7)
		if len(ids) != 200 {
			t.Fatalf("Make(%s, 200, 7) gave %d ids, want 200", class, len(ids))
		}
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != 200 {
			t.Errorf("Make(%s, 200, 7) repeats an id", class)
		}
		for _, id := range ids {
			if id == "" || !utf8.ValidString(id) {
				t.Errorf("Make(%s, 200, 7) gave %q, want a non-empty UTF-8 id", class, id)
			}
		}
		if again := caseids.Make(class, 200, 7); !slices.Equal(ids, again) {
			t.Errorf("Make(%s, 200, 7) differs between calls", class)
		}
		if other := caseids.Make(class, 200, 8); slices.Equal(ids, other) {
			t.Errorf("Make(%s, 200, 8) = Make(%s, 200, 7), want other ids for another seed", class, class)
		}
	}
}
