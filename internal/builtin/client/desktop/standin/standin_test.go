package standin

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/mst-eval/mst/internal/testkit/testneed"
)

// python is Debian's interpreter, the one with GTK's bindings.
const python = "/usr/bin/python3"

// TestAppCompiles writes the stand-in out and byte-compiles it. The real
// UI tests drive it through package atspi.
func TestAppCompiles(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		testneed.Missing(t, fmt.Sprintf("no %s (Debian: apt-get install python3; scripts/test installs it): %v", python, err))
	}
	app, _, err := Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(app); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o755 {
		t.Errorf("app.py mode %v, want 0755", fi.Mode().Perm())
	}
	if out, err := exec.Command(python, "-m", "py_compile", app).CombinedOutput(); err != nil {
		t.Fatalf("py_compile app.py: %v\n%s", err, out)
	}
}

// TestProfileParses checks that profile.json is JSON and names the app
// and its window.
func TestProfileParses(t *testing.T) {
	var p struct {
		App    string `json:"app"`
		Window string `json:"window"`
	}
	if err := json.Unmarshal(Profile, &p); err != nil {
		t.Fatalf("profile.json: %v", err)
	}
	if p.App != "app.py" || p.Window != "MST Stand-in Chat" {
		t.Errorf("profile.json names app %q, window %q; want app.py, MST Stand-in Chat", p.App, p.Window)
	}
}
