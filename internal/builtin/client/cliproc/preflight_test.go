package cliproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRequire checks what a client's preflight finds wrong with its
// program, and that each error names the program and the fix: a program
// that is not there, a script whose interpreter this machine lacks (as
// the npm CLIs' /usr/bin/env in an image without one), and a program that
// fails to answer --version.
func TestRequire(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missingEnv := filepath.Join(dir, "no-such-dir", "env")
	tests := []struct {
		name, command string
		// want are what the error says; none for a program that runs.
		want []string
	}{
		{name: "runs", command: script("good-cli", "#!/bin/sh\necho 'good-cli 1.2.3'\n")},
		{name: "not installed", command: filepath.Join(dir, "absent-cli"),
			want: []string{"the Test CLI", "absent-cli", "is not installed on this machine", "npm install -g test-cli", "clientOptions.command"}},
		{name: "no interpreter", command: script("env-cli", "#!"+missingEnv+" node\nconsole.log('1.0.0')\n"),
			want: []string{"the Test CLI", "env-cli", "#!" + missingEnv + " node", "has no " + missingEnv, "npm install -g test-cli"}},
		{name: "version fails", command: script("broken-cli", "#!/bin/sh\necho 'cannot load its library' >&2\nexit 3\n"),
			want: []string{"the Test CLI", "broken-cli", "does not run", "--version", "cannot load its library", "npm install -g test-cli"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Require("the Test CLI", tt.command, "npm install -g test-cli")
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("Require(%s) = %v, want nil", tt.command, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Require(%s) = nil, want an error saying %q", tt.command, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Require(%s) = %v, want it to say %q", tt.command, err, w)
				}
			}
		})
	}
}

// TestInterpreter checks how the first line of a program file is read.
func TestInterpreter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ head, line, path string }{
		{"#!/usr/bin/env node\nrest", "#!/usr/bin/env node", "/usr/bin/env"},
		{"#! /bin/sh -e\n", "#! /bin/sh -e", "/bin/sh"},
		{"#!/bin/bash", "#!/bin/bash", "/bin/bash"},
		{"\x7fELF\x02\x01", "", ""},
		{"#!\n", "", ""},
		{"", "", ""},
	} {
		p := filepath.Join(dir, "prog")
		if err := os.WriteFile(p, []byte(tt.head), 0o644); err != nil {
			t.Fatal(err)
		}
		if line, path := interpreter(p); line != tt.line || path != tt.path {
			t.Errorf("interpreter(%q) = %q, %q; want %q, %q", tt.head, line, path, tt.line, tt.path)
		}
	}
	if line, path := interpreter(filepath.Join(dir, "absent")); line != "" || path != "" {
		t.Errorf("interpreter(absent) = %q, %q; want nothing", line, path)
	}
}
