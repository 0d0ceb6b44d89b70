package kubernetes

import (
	"strings"
	"testing"
)

// TestImageHelp checks that what a pod's failed mst check says names both
// ways out: the worker image setup builds, or the right mst at a named path.
func TestImageHelp(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"1.2.0", ""} {
		msg := imageHelp("/opt/mst", version)
		want := []string{"mst runner setup docker --with debian", "--runner-option image=REF", "--runner-option mst=PATH", "/opt/mst", "CGO_ENABLED=0"}
		if version != "" {
			want = append(want, "mst "+version)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("imageHelp(/opt/mst, %q) = %q, want it to say %q", version, msg, w)
			}
		}
	}
}
