//go:build unix

package cliproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestVersionEnvironment checks what `--version` runs with: PATH with the
// program's folder first, a home, the variables the program asks for, and
// nothing else of MST's environment (a key set there stays out), and that
// the version is read from the last line, without its prefix and the note
// after it.
func TestVersionEnvironment(t *testing.T) {
	const secret = "sk-canary-version-env-5c1e"
	t.Setenv("ANTHROPIC_API_KEY", secret)
	t.Setenv("MST_VERSION_TEST_CANARY", secret)
	dir := t.TempDir()
	rec := filepath.Join(dir, "env")
	bin := filepath.Join(dir, "fake-cli")
	script := "#!/bin/sh\nenv > " + rec + "\necho 'warning: something first'\necho 'fake-cli 3.2.1 (build 7)'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := Version(t.Context(), bin, "fake-cli", "FAKE_QUIET=1")
	if err != nil || v != "3.2.1" {
		t.Fatalf("Version(%s) = %q, %v; want 3.2.1", bin, v, err)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	// The shell adds PWD, SHLVL and _ of its own.
	allowed := append(slices.Clone(versionVars), "PATH", "FAKE_QUIET", "PWD", "SHLVL", "_", "OLDPWD")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
		if !slices.Contains(allowed, k) {
			t.Errorf("`%s --version` got %s from MST's environment, want only %v", bin, k, allowed)
		}
	}
	if strings.Contains(string(data), secret) {
		t.Errorf("`%s --version` got the secret in its environment:\n%s", bin, data)
	}
	if !strings.HasPrefix(got["PATH"], dir+string(os.PathListSeparator)) || got["FAKE_QUIET"] != "1" || got["HOME"] != os.Getenv("HOME") {
		t.Errorf("`%s --version` got PATH=%q FAKE_QUIET=%q HOME=%q; want the program's folder first on PATH, the variable it asked for, and MST's home", bin, got["PATH"], got["FAKE_QUIET"], got["HOME"])
	}
}

// TestVersionTimeout checks that a program that never answers --version
// is stopped at the bound, with an error that says so (ErrVersionTimeout)
// and names the program and the bound. The program blocks on a FIFO no
// one writes; the test waits for nothing but the bound.
func TestVersionTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "never")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("making a FIFO: %v", err)
	}
	bin := filepath.Join(dir, "stuck-cli")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nread line < "+fifo+"\necho 1.0.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const within = 300 * time.Millisecond
	v, err := version(context.Background(), bin, "", within, nil)
	if !errors.Is(err, ErrVersionTimeout) || !strings.Contains(err.Error(), bin+" --version") || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Fatalf("version(a program that never answers) = %q, %v; want ErrVersionTimeout naming the program and the bound", v, err)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := versions.Load(versionKey{bin: bin, size: fi.Size(), mod: fi.ModTime()}); ok {
		t.Errorf("a version that timed out was remembered")
	}
}
