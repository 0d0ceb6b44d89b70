// Package testneed is the one way MST's tests react to a part missing on
// the machine (a daemon, a program, a library): under CI, where scripts/test
// installs every part, the test fails; elsewhere it skips, saying what to
// install.
package testneed

import (
	"os"
	"os/exec"
	"testing"
)

// Missing stops t because the part msg describes is missing: a failure
// when CI is set, a skip otherwise.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Program returns the path of the program name on PATH, or stops t as
// Missing does, saying how to install it.
func Program(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not on PATH ("+err.Error()+"): "+install)
	}
	return path
}
