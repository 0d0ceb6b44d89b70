package servers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/servers"
)

// TestConnectMissingCwd: a stdio server whose cwd is not a folder on this
// machine fails naming servers.NAME.cwd and the folder, not the command,
// whatever the cwd is instead (missing, missing deeper down, a file);
// and a missing command in a good cwd still names the command.
func TestConnectMissingCwd(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{
		"missing":        filepath.Join(base, "no-such-folder"),
		"missing deeper": filepath.Join(base, "no", "such", "folder"),
		"a file":         file,
		"under a file":   filepath.Join(file, "sub"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := testServer(t, "srv")
			s.Dir = dir
			c, err := servers.Connect(t.Context(), s)
			if err == nil {
				c.Close()
				t.Fatalf("Connect with cwd %s succeeded", dir)
			}
			msg := err.Error()
			if !strings.Contains(msg, "servers.srv.cwd") || !strings.Contains(msg, dir) || strings.Contains(msg, "servers.srv.command") {
				t.Errorf("Connect with cwd %s = %v; want servers.srv.cwd and the folder named, not the command", dir, err)
			}
		})
	}
	t.Run("missing command", func(t *testing.T) {
		t.Parallel()
		s := servers.Server{Name: "srv", Command: filepath.Join(base, "no-such-program"), Dir: base}
		c, err := servers.Connect(t.Context(), s)
		if err == nil {
			c.Close()
			t.Fatal("Connect with a missing command succeeded")
		}
		if msg := err.Error(); !strings.Contains(msg, "servers.srv.command") || strings.Contains(msg, "servers.srv.cwd") {
			t.Errorf("Connect with a missing command = %v; want servers.srv.command named", err)
		}
	})
}
