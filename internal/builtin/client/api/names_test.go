package api

import (
	"strings"
	"testing"

	"github.com/mst-eval/mst/servers"
)

func TestNameTools(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 70)
	a := &servers.Conn{Server: servers.Server{Name: "a"}, Tools: []servers.Tool{{Name: "echo"}, {Name: "greet (structured)"}, {Name: long}, {Name: "a.b"}}}
	b := &servers.Conn{Server: servers.Server{Name: "b srv"}, Tools: []servers.Tool{{Name: "echo"}, {Name: "a_b"}}}
	names, refs := nameTools([]*servers.Conn{a, b})
	want := []string{"echo", "greet_structured", strings.Repeat("x", 64), "a_b", "b_srv__echo", "b_srv__a_b"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("nameTools = %v, want %v", names, want)
	}
	for i, n := range names {
		if !validToolName.MatchString(n) {
			t.Errorf("name %q is not valid", n)
		}
		if refs[n].tool.Name == "" {
			t.Errorf("name %d %q maps to nothing", i, n)
		}
	}
	if refs["greet_structured"].tool.Name != "greet (structured)" || refs["b_srv__echo"].conn != b {
		t.Errorf("mapping back is wrong: %+v", refs)
	}
}
