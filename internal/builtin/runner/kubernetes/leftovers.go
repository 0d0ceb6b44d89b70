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

// parseLeftovers turns kubectl's list of worker pods into leftovers,
// sorted by name. A pod's run is its mst.run annotation (the run id as it
// is), or its label when the annotation is missing; its Detail is its
// phase and when it was created.
func parseLeftovers(out []byte) ([]runner.Leftover, error) {
	return parsePods(out, false)
}

// parseCoordinatorLeftovers is parseLeftovers for coordinator pods: a
// pod's Run is its detached run's id (the mst.coordinator annotation, or
// label), its Shard -1, and its Detail starts with "coordinator: ".
func parseCoordinatorLeftovers(out []byte) ([]runner.Leftover, error) {
	return parsePods(out, true)
}

func parsePods(out []byte, coordinators bool) ([]runner.Leftover, error) {
	var list podList
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("reading kubectl's list of pods: %w", err)
	}
	var found []runner.Leftover
	for _, it := range list.Items {
		m := it.Metadata
		detail := strings.TrimSpace(it.Status.Phase + ", created " + m.CreationTimestamp)
		if coordinators {
			id := m.Annotations[AnnotationCoordinator]
			if id == "" {
				id = m.Labels[LabelCoordinator]
			}
			found = append(found, runner.Leftover{ID: m.Name, Run: id, Shard: -1, Detail: "coordinator: " + detail})
			continue
		}
		run := m.Annotations[AnnotationRun]
		if run == "" {
			run = m.Labels[LabelRun]
		}
		n, _ := strconv.Atoi(m.Labels[LabelShard])
		found = append(found, runner.Leftover{ID: m.Name, Run: run, Shard: n, Detail: detail})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].ID < found[j].ID })
	return found, nil
}

// Leftovers lists the pods of the run runID (of every run when it is "")
// in the namespace the options name, found by their mst.run label: pods
// kept by keep=failed or keep=always, and pods of a coordinator that died.
// It lists detached runs' coordinator pods too, found by their
// mst.coordinator label (runID then names the detached run), after the
// workers' and each with Shard -1.
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
	found, err := parseLeftovers([]byte(out))
	if err != nil {
		return nil, err
	}
	out, err = k.run(ctx, nil, coordinatorListArgs(k, runID)...)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runner: listing the coordinator pods of %q in the namespace %s: %w", runID, set.namespace, err)
	}
	coordinators, err := parseCoordinatorLeftovers([]byte(out))
	if err != nil {
		return nil, err
	}
	return append(found, coordinators...), nil
}

// coordinatorListArgs lists the pods carrying LabelCoordinator (with the
// value id, unless it is "") as JSON.
func coordinatorListArgs(k *kubectl, id string) []string {
	sel := LabelCoordinator
	if id != "" {
		sel += "=" + labelValue(id)
	}
	return k.args("get", "pods", "--selector", sel, "--output", "json")
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
