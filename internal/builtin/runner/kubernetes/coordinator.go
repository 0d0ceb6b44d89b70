package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mst-eval/mst/runner"
)

// A detached run's coordinator machine on this runner is a pod of its own,
// mst-coordinator-<id>, in the runner's namespace. It runs as the service
// account the coordinatorServiceAccount option names, whose token
// Kubernetes mounts in it: the coordinator's own `mst run --runner
// kubernetes` reaches the API with that token through kubectl's in-cluster
// configuration. MST never copies the user's kubeconfig to the pod.
//
// The pod runs the coordinatorImage option's image (the image option's
// when it is not given): it needs this MST version at the mst option's
// path, kubectl on PATH, and tar. MST's own worker image is FROM scratch
// and has no kubectl, so without either option a detached run is refused.
//
// Kubernetes ends the pod at the deadline by itself (activeDeadlineSeconds,
// and its main process, `mst runner idle --deadline`, ends then too),
// which ends every process in it, the coordinator's included: no watchdog
// is needed, and the coordinator's pid file is not read. An ended pod stays
// listed (phase Failed or Succeeded) until it is deleted: Leftovers lists
// it, and `mst runner cleanup` deletes it. Finish deletes the pod from
// inside, as the service account; Dispose deletes it from here.

// EnvInCluster is set to 1 in the environment of a detached run's
// coordinator commands in their pod (the coordinator machine's Env). With
// it, the runner leaves out the kubeconfig and context options, which name
// the launching machine's files and contexts, so that kubectl uses the
// pod's service account.
const EnvInCluster = "MST_KUBERNETES_IN_CLUSTER"

// inCluster reports whether this process is a detached run's coordinator
// (or one of its commands) in its pod.
func inCluster() bool { return os.Getenv(EnvInCluster) == "1" }

// CoordinatorKubectl is the kubectl the coordinator pod runs, found on the
// image's PATH.
const CoordinatorKubectl = "kubectl"

// CreateCoordinator makes a detached run's coordinator machine: the pod
// mst-coordinator-<id> in the namespace, running as the coordinator's
// service account, from the coordinator image. It waits for the pod to be
// Ready and checks that the image holds this MST version and kubectl; a pod
// that fails either is deleted. p.HostPaths are not used: a pod sees none
// of this machine's files, and neither do the workers.
func CreateCoordinator(ctx context.Context, p runner.CoordinatorParams) (runner.CoordinatorMachine, error) {
	set, err := parseSettings(p.Options)
	if err != nil {
		return nil, err
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if p.ID == "" {
		return nil, errors.New("kubernetes runner: a coordinator pod needs the detached run's id")
	}
	image, err := coordinatorImage(set)
	if err != nil {
		return nil, err
	}
	deadline := p.Deadline
	if deadline <= 0 {
		deadline = runner.DefaultCoordinatorDeadline
	}
	// The user creates, watches, execs into and deletes the coordinator's
	// pod with the rights its workers' pods need.
	k, err := readyKubectl(ctx, set)
	if err != nil {
		return nil, err
	}
	name := coordinatorName(p.ID)
	manifest := coordinatorManifest(name, p.ID, set, image, p.MSTVersion, deadline)
	if _, err := k.run(ctx, bytes.NewReader(manifest), k.createArgs()...); err != nil {
		switch {
		case says(err, "AlreadyExists"):
			// Another pod holds the name: not ours to delete.
			return nil, fmt.Errorf("kubernetes runner: a pod named %s is already in the namespace %s (a coordinator of the same detached run?): "+
				"delete it with `mst runner cleanup --runner kubernetes --runner-option namespace=%s %s` or `kubectl delete pod -n %s %s`, then try again",
				name, set.namespace, set.namespace, p.ID, set.namespace, name)
		case says(err, `serviceaccount "`+set.coordinatorServiceAccount+`" not found`):
			return nil, fmt.Errorf("kubernetes runner: creating the coordinator pod %s: the service account %s is not in the namespace %s: "+
				"create it, with the Role and RoleBinding docs/kubernetes.md gives, or name another with --runner-option %s=NAME: %w",
				name, set.coordinatorServiceAccount, set.namespace, OptionCoordinatorServiceAccount, err)
		}
		return nil, fmt.Errorf("kubernetes runner: creating the coordinator pod %s in the namespace %s: %w", name, set.namespace, err)
	}
	c := &coordinatorPod{
		pod:      pod{kubectl: k, name: name, image: image, set: set, grace: runner.DefaultStopGrace, logger: logger},
		deadline: deadline,
	}
	fail := func(err error) (runner.CoordinatorMachine, error) {
		if derr := c.Dispose(context.WithoutCancel(ctx)); derr != nil {
			logger.Warn("deleting a coordinator pod that could not be used failed", "pod", c.ID(), "err", derr)
		}
		return nil, fmt.Errorf("kubernetes runner: %w", err)
	}
	ready, err := k.run(ctx, nil, k.waitArgs(name, set.podTimeout)...)
	if err != nil {
		return fail(fmt.Errorf("the coordinator pod %s of %s was not Ready within %s (raise --runner-option podTimeout, or see why with kubectl describe pod -n %s %s): %w",
			name, image, set.podTimeout, set.namespace, name, err))
	}
	c.image = pinImage(ready, image, logger.Info)
	if err := checkImage(ctx, k, name, image, set, p.MSTVersion); err != nil {
		return fail(fmt.Errorf("checking the image in the coordinator pod %s: %w", name, err))
	}
	if _, err := k.run(ctx, nil, k.execArgs(name, false, CoordinatorKubectl, "version", "--client")...); err != nil {
		return fail(fmt.Errorf("the coordinator image %s has no kubectl on PATH that runs, and the coordinator starts the workers' pods with it (%w): "+
			"build an image with this MST at %s, kubectl and tar, and name it with --runner-option %s=REF", image, err, set.mst, OptionCoordinatorImage))
	}
	logger.Debug("started the coordinator pod", "pod", c.ID(), "image", image, "serviceAccount", set.coordinatorServiceAccount, "deadline", deadline.String())
	return c, nil
}

// coordinatorImage is the image of the coordinator pod, or the error that
// says which options to give.
func coordinatorImage(set settings) (string, error) {
	if set.coordinatorServiceAccount == "" {
		return "", fmt.Errorf("kubernetes runner: a detached run needs --runner-option %s=NAME, the service account in the namespace %s that its coordinator pod runs as "+
			"and starts the workers' pods with (docs/kubernetes.md gives the Role it needs); your kubeconfig is never copied to the pod",
			OptionCoordinatorServiceAccount, set.namespace)
	}
	switch {
	case set.coordinatorImage != "":
		return set.coordinatorImage, nil
	case set.image != "":
		return set.image, nil
	}
	return "", fmt.Errorf("kubernetes runner: a detached run needs --runner-option %s=REF, an image the nodes can pull with this MST version at %s, kubectl on PATH and tar: "+
		"the coordinator pod starts the workers' pods with kubectl, and MST's own worker image (mst runner setup docker) has none", OptionCoordinatorImage, set.mst)
}

// coordinatorName is runner.CoordinatorName.
func coordinatorName(id string) string { return runner.CoordinatorName(id) }

// coordinatorPod is a detached run's coordinator machine. Exec, CopyTo and
// CopyFrom are a worker pod's (under `mst runner relay`).
type coordinatorPod struct {
	pod
	deadline time.Duration
}

// Env tells the coordinator's commands that they run in the pod, so that
// kubectl uses the pod's service account (EnvInCluster). kubectl finds it
// by itself, from the token Kubernetes mounts and the variables it sets
// (KUBERNETES_SERVICE_HOST and _PORT); no KUBECONFIG is set.
func (c *coordinatorPod) Env() []string { return []string{EnvInCluster + "=1"} }

// Finish deletes the pod from inside it, as its service account, without
// waiting: the pod's main process idles until the deadline, so the pod
// would not end when the coordinator does. The deletion then ends every
// process in the pod, this command included.
func (c *coordinatorPod) Finish() []string {
	in := c.set
	in.kubeconfig, in.context = "", ""
	k := &kubectl{set: in}
	return append([]string{CoordinatorKubectl}, k.deleteArgs(c.name)...)
}

func (c *coordinatorPod) Identity() string {
	return fmt.Sprintf("the service account %s of the namespace %s, whose token Kubernetes mounts in the pod %s (your kubeconfig is not copied there): "+
		"it can do what its Role grants, which docs/kubernetes.md keeps to creating, watching, exec'ing into and deleting pods in %s",
		c.set.coordinatorServiceAccount, c.set.namespace, c.name, c.set.namespace)
}

// Dispose deletes the pod without waiting for it to end. A pod that is
// gone already is not an error, so it is safe to call again.
func (c *coordinatorPod) Dispose(ctx context.Context) error { return c.Remove(ctx) }
