package cliproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Require checks, for a client's preflight, that its program can run on
// this machine: that command is found (a name on PATH, or a path), that
// the interpreter its first line names is there when it is a script (the
// npm CLIs start with #!/usr/bin/env node), and that `command --version`
// answers (Version, with its bound and its minimal environment). what
// names the program ("the Claude Code CLI") and setup says how to install
// it; the error says which check failed and what to do.
func Require(what, command, setup string, extra ...string) error {
	bin, err := exec.LookPath(command)
	if err != nil {
		return fmt.Errorf("%s (%s) is not installed on this machine: install it with %s, or set clientOptions.command to its path", what, command, setup)
	}
	if line, interp := interpreter(bin); interp != "" {
		if _, err := os.Stat(interp); err != nil {
			return fmt.Errorf("%s (%s) is a script that starts with %q, and this machine has no %s to run it: %w. "+
				"Run it on a machine (or in an image) that has %s, such as a Debian-based one, or install it with %s where it can run",
				what, bin, line, interp, err, interp, setup)
		}
	}
	if _, err := Version(context.Background(), bin, "", extra...); err != nil {
		if errors.Is(err, ErrVersionTimeout) {
			return fmt.Errorf("%s (%s) is installed, but `%s --version` did not answer within %s: check that it runs on this machine (a machine this loaded may need fewer shards), or reinstall it with %s", what, bin, command, VersionTimeout, setup)
		}
		return fmt.Errorf("%s (%s) is installed but does not run: `%s --version` failed: %w. Reinstall it with %s, or set clientOptions.command to one that runs", what, bin, command, err, setup)
	}
	return nil
}

// interpreter reads the first line of the program file bin: for a script
// (#!INTERPRETER [ARG]), that line and the interpreter's path; for any
// other file, or one it cannot read, "".
func interpreter(bin string) (line, path string) {
	f, err := os.Open(bin)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	rest, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		return "", ""
	}
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	fields := strings.Fields(string(rest))
	if len(fields) == 0 {
		return "", ""
	}
	return "#!" + strings.TrimRight(string(rest), " \t\r"), fields[0]
}
