package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
)

// kubectl runs the kubectl command for one namespace, with the kubeconfig
// and context the options name. Every command inherits MST's environment,
// so KUBECONFIG and the user's credential plugins apply.
type kubectl struct {
	cli *clicmd.CLI
	set settings
}

// findKubectl finds kubectl on PATH.
func findKubectl(set settings) (*kubectl, error) {
	c, err := clicmd.Find("kubectl", errors.New("kubernetes runner: the kubectl command is not on PATH: install it (https://kubernetes.io/docs/tasks/tools/, or Debian's kubectl package)"))
	if err != nil {
		return nil, err
	}
	c.Short = shortArgs
	return &kubectl{cli: c, set: set}, nil
}

// args returns kubectl's arguments for one command: the global flags
// (kubeconfig, context, namespace) and then rest.
func (k *kubectl) args(rest ...string) []string {
	var a []string
	if k.set.kubeconfig != "" {
		a = append(a, "--kubeconfig", k.set.kubeconfig)
	}
	if k.set.context != "" {
		a = append(a, "--context", k.set.context)
	}
	a = append(a, "--namespace", k.set.namespace)
	return append(a, rest...)
}

// createArgs creates the object read from stdin and prints its name.
func (k *kubectl) createArgs() []string {
	return k.args("create", "--filename", "-", "--output", "name")
}

// waitArgs waits for the pod to be Ready and prints it as JSON, which
// says which image its container runs.
func (k *kubectl) waitArgs(pod string, timeout time.Duration) []string {
	return k.args("wait", "--for=condition=Ready", "pod/"+pod, "--timeout="+timeout.String(), "--output", "json")
}

// execArgs runs argv in the pod's worker container, with stdin attached
// when stdin is true.
func (k *kubectl) execArgs(pod string, stdin bool, argv ...string) []string {
	a := []string{"exec"}
	if stdin {
		a = append(a, "--stdin")
	}
	a = append(a, pod, "--container", ContainerName, "--")
	return k.args(append(a, argv...)...)
}

// deleteArgs deletes the pod without waiting for it to end; a pod that is
// gone is not an error.
func (k *kubectl) deleteArgs(pod string) []string {
	return k.args("delete", "pod", pod, "--wait=false", "--ignore-not-found")
}

// listArgs lists the pods carrying LabelRun (with the value run, unless it
// is "") as JSON.
func (k *kubectl) listArgs(run string) []string {
	sel := LabelRun
	if run != "" {
		sel += "=" + labelValue(run)
	}
	return k.args("get", "pods", "--selector", sel, "--output", "json")
}

// says reports whether err is a failed kubectl command whose stderr holds
// text, such as "AlreadyExists".
func says(err error, text string) bool { return clicmd.Says(err, text) }

// run runs kubectl with args and returns its stdout, trimmed. stdin may be
// nil. The error quotes the command's stderr.
func (k *kubectl) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return k.cli.Run(ctx, stdin, args...)
}

// shortArgs keeps kubectl's subcommand and a few arguments after it, for
// error messages.
func shortArgs(args []string) []string {
	for i, a := range args {
		if !strings.HasPrefix(a, "--") && (i == 0 || !takesValue(args[i-1])) {
			end := min(len(args), i+3)
			out := append([]string(nil), args[i:end]...)
			if end < len(args) {
				out = append(out, "…")
			}
			return out
		}
	}
	return args
}

// takesValue reports whether the global flag f is followed by its value.
func takesValue(f string) bool {
	return f == "--kubeconfig" || f == "--context" || f == "--namespace"
}

// reachable checks that kubectl reaches the cluster and may list pods in
// the namespace. Its error says how to get there.
func (k *kubectl) reachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := k.run(ctx, nil, k.args("get", "pods", "--selector", LabelRun, "--output", "name")...)
	if err != nil {
		return fmt.Errorf("kubernetes runner: kubectl cannot list pods in the namespace %s (check the kubeconfig and context options, that the namespace exists, and your rights there; for MST's tests: scripts/k8s start): %w", k.set.namespace, err)
	}
	return nil
}
