package cli

import (
	"strings"
	"testing"
)

func TestParseWith(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, module, version, err string
		dir                      bool
	}{
		{in: "example.com/acme/p@v1.2.0", module: "example.com/acme/p", version: "v1.2.0"},
		{in: "example.com/acme/p", module: "example.com/acme/p", version: "latest"},
		{in: "example.com/acme/p=../p", module: "example.com/acme/p", dir: true},
		{in: "=../p", err: "give a Go module path"},
		{in: "example.com/acme/p=", err: "nothing after ="},
		{in: "example com/p", err: "give a Go module path"},
	} {
		b, err := parseWith(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseWith(%q) = %v, want an error saying %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("parseWith(%q): %v", tc.in, err)
		case b.module != tc.module || b.version != tc.version || (b.dir != "") != tc.dir:
			t.Errorf("parseWith(%q) = %+v", tc.in, b)
		}
	}
}

// TestBuildNeedsSource: an mst built from source cannot name its own
// published version, so mst build asks for the source folder, and refuses
// one that is not MST's.
func TestBuildNeedsSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--with", "example.com/acme/p@v1.0.0"}, "give --mst-dir"},
		{[]string{"build", "--with", "example.com/acme/p@v1.0.0", "--mst-dir", t.TempDir()}, "not a folder of MST's source"},
		{[]string{"build"}, "give at least one --with"},
	} {
		var out, errb strings.Builder
		code := Main(t.Context(), tc.args, Stdio{Out: &out, Err: &errb})
		if code != int(ExitUsage) || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("mst %s: exit %d, %q; want %d and %q", strings.Join(tc.args, " "), code, errb.String(), ExitUsage, tc.want)
		}
	}
}
