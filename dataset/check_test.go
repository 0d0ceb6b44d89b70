package dataset

import (
	"strings"
	"testing"
)

// TestCheck holds cases made in Go to a dataset file's rules, each problem
// placed at the case's position.
func TestCheck(t *testing.T) {
	t.Parallel()
	if err := Check("plan", []Case{{ID: "a", Input: "hi"}, {ID: "b", Input: "there", Metadata: map[string]any{"k": 1}}}); err != nil {
		t.Errorf("Check(two good cases) = %v, want nil", err)
	}
	tests := []struct {
		name  string
		cases []Case
		want  string
	}{
		{"blank id", []Case{{ID: " ", Input: "hi"}}, "plan:1: id is blank"},
		{"blank input", []Case{{ID: "a", Input: "hi"}, {ID: "b", Input: " \n"}}, `plan:2: case "b": input is blank`},
		{"duplicate", []Case{{ID: "a", Input: "hi"}, {ID: "a", Input: "again"}}, "duplicate id (first at plan:1)"},
		{"none", nil, "holds no cases"},
		{"bad UTF-8", []Case{{ID: "a", Input: "\xff"}}, "plan:1"},
	}
	for _, tt := range tests {
		err := Check("plan", tt.cases)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%s) = %v, want an error that says %q", tt.name, err, tt.want)
		}
	}
}
