package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
)

// findCLI finds the docker program on PATH.
func findCLI() (*clicmd.CLI, error) {
	return clicmd.Find("docker", errors.New("docker runner: the docker command is not on PATH: install Docker (Debian: apt-get install docker.io; elsewhere Docker Desktop or Colima)"))
}

// says reports whether err is a failed docker command whose stderr holds
// text, such as "No such container".
func says(err error, text string) bool { return clicmd.Says(err, text) }

// platform asks the daemon for its OS and architecture ("linux", "amd64").
// Its error says how to get a daemon to answer.
func platform(ctx context.Context, c *clicmd.CLI) (goos, arch string, err error) {
	out, err := c.Run(ctx, nil, "version", "--format", "{{.Server.Os}}/{{.Server.Arch}}")
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
