package docker

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

// cli runs the Docker CLI. Every command inherits MST's environment, so
// DOCKER_HOST, DOCKER_CONTEXT and the user's Docker config apply.
type cli struct {
	// bin is the docker program.
	bin string
}

// findCLI finds the docker program on PATH.
func findCLI() (*cli, error) {
	bin, err := exec.LookPath("docker")
	if err != nil {
		return nil, errors.New("docker runner: the docker command is not on PATH: install Docker (Debian: apt-get install docker.io; elsewhere Docker Desktop or Colima)")
	}
	return &cli{bin: bin}, nil
}

// cmdError is a docker command that failed, with what it printed on stderr.
type cmdError struct {
	args   []string
	stderr string
	err    error
}

func (e *cmdError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("docker %s: %s", strings.Join(e.args, " "), msg)
}

func (e *cmdError) Unwrap() error { return e.err }

// says reports whether err is a failed docker command whose stderr holds
// text, such as "No such container".
func says(err error, text string) bool {
	var ce *cmdError
	return errors.As(err, &ce) && strings.Contains(ce.stderr, text)
}

// run runs docker with args and returns its stdout, trimmed. stdin may be
// nil. The error quotes the command's stderr.
func (c *cli) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	isolate(cmd)
	if err := cmd.Run(); err != nil {
		return "", &cmdError{args: shortArgs(args), stderr: stderr.String(), err: err}
	}
	return strings.TrimSpace(stdout.String()), nil
}

// shortArgs keeps the first few arguments of a docker command, for error
// messages: a docker run has dozens.
func shortArgs(args []string) []string {
	if len(args) > 3 {
		return append(append([]string(nil), args[:3]...), "…")
	}
	return args
}

// platform asks the daemon for its OS and architecture ("linux", "amd64").
// Its error says how to get a daemon to answer.
func (c *cli) platform(ctx context.Context) (goos, arch string, err error) {
	out, err := c.run(ctx, nil, "version", "--format", "{{.Server.Os}}/{{.Server.Arch}}")
	if err != nil {
		where := "the default Docker daemon"
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			where = "the Docker daemon at DOCKER_HOST=" + h
		}
		return "", "", fmt.Errorf("docker runner: cannot reach %s: start it (for MST's tests: scripts/dockerd start) or point DOCKER_HOST at one that runs: %w", where, err)
	}
	goos, arch, _ = strings.Cut(out, "/")
	if goos != "linux" {
		return "", "", fmt.Errorf("docker runner: the Docker daemon runs %s containers; MST's workers need Linux containers", out)
	}
	return goos, arch, nil
}
