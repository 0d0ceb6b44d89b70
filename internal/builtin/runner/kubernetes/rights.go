package kubernetes

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Right is one thing the runner does through the API server, as kubectl
// auth can-i names it: a verb on a resource (pods) or subresource
// (pods/exec) of the core API group.
type Right struct {
	Verb, Resource string
}

func (r Right) String() string { return r.Verb + " " + r.Resource }

// Rights are every right the runner uses in its namespace, which the Role
// of docs/kubernetes.md grants, and New checks before a run starts:
//   - create pods: kubectl create of each shard's pod;
//   - get, list and watch pods: kubectl wait (it gets the pod, then lists
//     and watches it until it is Ready) and the list of leftovers;
//   - delete pods: at each shard's end, and mst runner cleanup;
//   - create pods/exec: every kubectl exec (the worker, the copies);
//   - get pods/exec: older API servers authorize an exec over WebSocket
//     (what recent kubectl versions use) as get, recent ones as create;
//     the runner cannot tell which one it will meet before it execs.
var Rights = []Right{
	{"create", "pods"}, {"get", "pods"}, {"list", "pods"}, {"watch", "pods"}, {"delete", "pods"},
	{"create", "pods/exec"}, {"get", "pods/exec"},
}

// canIWords are the words of kubectl auth can-i for r: a subresource
// goes in --subresource, since can-i reads pods/exec as the pod named
// exec.
func (r Right) canIWords() []string {
	if res, sub, ok := strings.Cut(r.Resource, "/"); ok {
		return []string{r.Verb, res, "--subresource=" + sub}
	}
	return []string{r.Verb, r.Resource}
}

// canIArgs asks the API server whether this identity has the right r in
// the namespace. kubectl prints yes or no, and exits 1 on no.
func (k *kubectl) canIArgs(r Right) []string {
	return k.args(append([]string{"auth", "can-i"}, r.canIWords()...)...)
}

// checkRights asks the API server, once for each of Rights and all at
// once, whether the identity kubectl uses has it in the namespace. Its
// error names every missing right, the can-i command that shows it, and
// the Role to apply; without this check a missing watch would show only as
// a pod that is never Ready, after podTimeout.
func (k *kubectl) checkRights(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	answers := make([]string, len(Rights))
	errs := make([]error, len(Rights))
	var wg sync.WaitGroup
	for i, r := range Rights {
		wg.Go(func() { answers[i], errs[i] = k.canI(ctx, r) })
	}
	wg.Wait()
	var missing []string
	var first Right
	for i, r := range Rights {
		switch {
		case errs[i] != nil:
			return fmt.Errorf("kubernetes runner: kubectl cannot ask the API server whether it may %s in the namespace %s (check the kubeconfig and context options; for MST's tests: scripts/k8s start): %w",
				r, k.set.namespace, errs[i])
		case answers[i] != "yes":
			if missing == nil {
				first = r
			}
			missing = append(missing, r.String())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	who := "the identity your kubeconfig gives kubectl"
	if inCluster() {
		who = "this pod's service account"
	}
	return fmt.Errorf("kubernetes runner: %s may not %s in the namespace %s (`kubectl auth can-i %s -n %s` says no), and the runner needs it: "+
		"apply the Role of docs/kubernetes.md (\"Rights\": create, get, list, watch and delete on pods; create and get on pods/exec) in %s and bind it to that identity",
		who, strings.Join(missing, ", "), k.set.namespace, strings.Join(first.canIWords(), " "), k.set.namespace, k.set.namespace)
}

// canI runs kubectl auth can-i for r and returns its answer, "yes" or
// "no". A "no" is no error; a failure to ask is.
func (k *kubectl) canI(ctx context.Context, r Right) (string, error) {
	var out []byte
	err := k.cli.RunReading(ctx, func(rd io.Reader) error {
		var err error
		out, err = io.ReadAll(rd)
		return err
	}, k.canIArgs(r)...)
	answer := strings.TrimSpace(string(out))
	switch {
	case answer == "no" || strings.HasPrefix(answer, "no "):
		// Some servers add a reason: "no - …".
		return "no", nil
	case err == nil && answer == "yes":
		return answer, nil
	}
	if err == nil {
		err = fmt.Errorf("kubectl auth can-i printed %q, not yes or no", answer)
	}
	return "", err
}
