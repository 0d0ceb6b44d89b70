package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/runner"
)

// Leftovers lists the containers of the run runID (of every run when it is
// ""), found by their mst.run label on the Docker host: containers kept by
// keep=failed or keep=always, and containers of a coordinator that died.
// Each one's Detail is Docker's status ("Up 3 minutes", "Exited (137) …").
func Leftovers(ctx context.Context, options map[string]string, runID string) ([]runner.Leftover, error) {
	c, err := findCLI()
	if err != nil {
		return nil, err
	}
	filter := "label=" + LabelRun
	if runID != "" {
		filter += "=" + runID
	}
	format := `{{.Names}}` + "\t" + `{{.Label "` + LabelRun + `"}}` + "\t" + `{{.Label "` + LabelShard + `"}}` + "\t" + `{{.Status}}`
	out, err := c.Run(ctx, nil, "ps", "--all", "--no-trunc", "--filter", filter, "--format", format)
	if err != nil {
		if _, _, perr := platform(ctx, c); perr != nil {
			return nil, perr
		}
		return nil, fmt.Errorf("docker runner: listing containers: %w", err)
	}
	var list []runner.Leftover
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 4)
		for len(f) < 4 {
			f = append(f, "")
		}
		n, _ := strconv.Atoi(f[2])
		list = append(list, runner.Leftover{ID: f[0], Run: f[1], Shard: n, Detail: f[3]})
	}
	return list, nil
}

// Remove deletes a container Leftovers listed, running or not. One that is
// gone already is not an error.
func Remove(ctx context.Context, options map[string]string, l runner.Leftover) error {
	c, err := findCLI()
	if err != nil {
		return err
	}
	if err := removeContainer(ctx, c, l.ID); err != nil {
		return fmt.Errorf("docker runner: removing the container %s: %w", l.ID, err)
	}
	return nil
}
