package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/runner"
)

// podList is the part of `kubectl get pods -o json` Leftovers reads.
type podList struct {
	Items []struct {
		Metadata struct {
			Name              string            `json:"name"`
			Namespace         string            `json:"namespace"`
			Labels            map[string]string `json:"labels"`
			Annotations       map[string]string `json:"annotations"`
			CreationTimestamp string            `json:"creationTimestamp"`
		} `json:"metadata"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"items"`
}

// parseLeftovers turns kubectl's pod list into leftovers, sorted by name.
// A pod's run is its mst.run annotation (the run id as it is), or its
// label when the annotation is missing; its Detail is its phase and when
// it was created.
func parseLeftovers(out []byte) ([]runner.Leftover, error) {
	var list podList
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("reading kubectl's list of pods: %w", err)
	}
	var found []runner.Leftover
	for _, it := range list.Items {
		m := it.Metadata
		run := m.Annotations[AnnotationRun]
		if run == "" {
			run = m.Labels[LabelRun]
		}
		n, _ := strconv.Atoi(m.Labels[LabelShard])
		detail := strings.TrimSpace(it.Status.Phase + ", created " + m.CreationTimestamp)
		found = append(found, runner.Leftover{ID: m.Name, Run: run, Shard: n, Detail: detail})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].ID < found[j].ID })
	return found, nil
}

// Leftovers lists the pods of the run runID (of every run when it is "")
// in the namespace the options name, found by their mst.run label: pods
// kept by keep=failed or keep=always, and pods of a coordinator that died.
func Leftovers(ctx context.Context, options map[string]string, runID string) ([]runner.Leftover, error) {
	set, err := parseSettings(options)
	if err != nil {
		return nil, err
	}
	k, err := findKubectl(set)
	if err != nil {
		return nil, err
	}
	out, err := k.run(ctx, nil, k.listArgs(runID)...)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runner: listing the pods of run %q in the namespace %s: %w", runID, set.namespace, err)
	}
	return parseLeftovers([]byte(out))
}

// Remove deletes a pod Leftovers listed, running or not. One that is gone
// already is not an error.
func Remove(ctx context.Context, options map[string]string, l runner.Leftover) error {
	set, err := parseSettings(options)
	if err != nil {
		return err
	}
	k, err := findKubectl(set)
	if err != nil {
		return err
	}
	if _, err := k.run(ctx, nil, k.deleteArgs(l.ID)...); err != nil {
		return fmt.Errorf("kubernetes runner: deleting the pod %s in the namespace %s: %w", l.ID, set.namespace, err)
	}
	return nil
}
