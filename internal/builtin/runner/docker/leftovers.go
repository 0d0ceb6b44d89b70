package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/runner"
)

// Leftovers lists the containers of the run runID (of every run when it is
// ""), found by their mst.run label on the Docker host: containers kept by
// keep=failed or keep=always, and containers of a coordinator that died.
// It lists detached runs' coordinator containers too, found by their
// mst.coordinator label (runID then names the detached run): each has
// Shard -1. Each one's Detail is Docker's status ("Up 3 minutes", "Exited
// (137) …"), after "coordinator: " for a coordinator container.
func Leftovers(ctx context.Context, options map[string]string, runID string) ([]runner.Leftover, error) {
	c, err := findCLI()
	if err != nil {
		return nil, err
	}
	var list []runner.Leftover
	for _, label := range []string{LabelRun, LabelCoordinator} {
		found, err := labelled(ctx, c, label, runID)
		if err != nil {
			if _, _, perr := platform(ctx, c); perr != nil {
				return nil, perr
			}
			return nil, fmt.Errorf("docker runner: listing containers: %w", err)
		}
		list = append(list, found...)
	}
	return list, nil
}

// labelled lists the containers that carry label, with the value value
// when it is not "".
func labelled(ctx context.Context, c *clicmd.CLI, label, value string) ([]runner.Leftover, error) {
	filter := "label=" + label
	if value != "" {
		filter += "=" + value
	}
	format := `{{.Names}}` + "\t" + `{{.Label "` + label + `"}}` + "\t" + `{{.Label "` + LabelShard + `"}}` + "\t" + `{{.Status}}`
	out, err := c.Run(ctx, nil, "ps", "--all", "--no-trunc", "--filter", filter, "--format", format)
	if err != nil {
		return nil, err
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
		l := runner.Leftover{ID: f[0], Run: f[1], Detail: f[3]}
		if label == LabelCoordinator {
			l.Shard, l.Detail = -1, "coordinator: "+l.Detail
		} else {
			l.Shard, _ = strconv.Atoi(f[2])
		}
		list = append(list, l)
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
	if err := removeContainer(ctx, c, l.ID); err != nil && !says(err, "already in progress") {
		return fmt.Errorf("docker runner: removing the container %s: %w", l.ID, err)
	}
	return nil
}
