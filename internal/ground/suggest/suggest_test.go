package suggest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSuggest(t *testing.T) {
	t.Parallel()
	known := []string{"trials", "timeout", "maxActions", "name", "anthropic", "openai", "offline", "weather"}
	tests := []struct {
		got  string
		want []string
	}{
		{"trails", []string{"trials"}},
		{"timeot", []string{"timeout"}},
		{"Trials", []string{"trials"}},
		{"max", []string{"maxActions"}},
		{"antropic", []string{"anthropic"}},
		{"wether", []string{"weather"}},
		{"nam", []string{"name"}},
		{"xyz", nil},
		{"", nil},
		{"trials", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Closest(tt.got, known)); diff != "" {
			t.Errorf("Closest(%q) mismatch (-want +got):\n%s", tt.got, diff)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "abc", 0},
		{"trails", "trials", 1},
		{"timeot", "timeout", 1},
		{"kitten", "sitting", 3},
		{"", "abc", 3},
		{"héllo", "hello", 1},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
