package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/kubernetes"
	"github.com/mst-eval/mst/runner"
)

// The cluster's pods never run a container, and kubectl exec into one
// runs its command on this machine, so these tests cannot show a
// coordinator reaching the API server with its pod's token. What they show
// instead: the pod is made as documented, its channel works, it is deleted
// and listed as it should be, and the Role docs/kubernetes.md gives lets
// its service account (impersonated through a kubeconfig) do everything
// the runner does, and nothing else the tests ask.

// coordinatorAccount is the service account of docs/kubernetes.md's Role.
const coordinatorAccount = "mst-coordinator"

// kc runs kubectl with the tests' kubeconfig and returns its stdout.
func kc(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--namespace", testNamespace}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New(strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// docsRole is the YAML block of docs/kubernetes.md that makes the
// coordinator's account, Role and RoleBinding, for the test namespace.
func docsRole(t *testing.T) string {
	t.Helper()
	return docsRoleIn(t, testNamespace)
}

// docsRoleIn is docsRole for the namespace ns.
func docsRoleIn(t *testing.T, ns string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: Role\n") {
			if !strings.Contains(block, "namespace: evals\n") || !strings.Contains(block, "name: "+coordinatorAccount+"\n") {
				t.Fatalf("the Role in docs/kubernetes.md is not for the account %s in the namespace evals:\n%s", coordinatorAccount, block)
			}
			return strings.ReplaceAll(block, "namespace: evals\n", "namespace: "+ns+"\n")
		}
	}
	t.Fatal("docs/kubernetes.md has no yaml block with a Role")
	return ""
}

// applyRole makes the coordinator's account as docs/kubernetes.md says,
// and deletes it when the test ends.
func applyRole(t *testing.T) {
	t.Helper()
	role := docsRole(t)
	if _, err := kc(t, role, "apply", "--filename", "-"); err != nil {
		t.Fatalf("kubectl apply of the Role in docs/kubernetes.md: %v", err)
	}
	t.Cleanup(func() {
		if _, err := kc(t, role, "delete", "--filename", "-", "--ignore-not-found"); err != nil {
			t.Errorf("deleting the Role: %v", err)
		}
	})
}

// asCoordinator writes a kubeconfig that reaches the cluster as the tests'
// does, impersonating the coordinator's service account, and returns its
// path. It holds file paths, not keys.
func asCoordinator(t *testing.T) string {
	t.Helper()
	return asAccount(t, coordinatorAccount)
}

// asAccount is asCoordinator for the service account account of the test
// namespace.
func asAccount(t *testing.T, account string) string {
	t.Helper()
	out, err := kc(t, "", "config", "view", "--minify", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatal(err)
	}
	users, _ := cfg["users"].([]any)
	if len(users) != 1 {
		t.Fatalf("the tests' kubeconfig has %d users, want 1", len(users))
	}
	user := users[0].(map[string]any)["user"].(map[string]any)
	user["as"] = "system:serviceaccount:" + testNamespace + ":" + account
	b, _ := json.Marshal(cfg)
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// waitDeleted waits until the pod name is gone, as kubectl wait does.
func waitDeleted(t *testing.T, name string) {
	t.Helper()
	if _, err := kc(t, "", "wait", "--for=delete", "pod/"+name, "--timeout=5m"); err != nil {
		t.Fatalf("the pod %s is still there: %v", name, err)
	}
}

// noCoordinatorPod fails the test if a pod of the detached run id is in
// the namespace.
func noCoordinatorPod(t *testing.T, id string) {
	t.Helper()
	out, err := kc(t, "", "get", "pods", "--selector", kubernetes.LabelCoordinator+"="+id, "--output", "name")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("pods of %s: %q, %v; want none", id, out, err)
	}
}

func coordinatorOptions(t *testing.T, mst string) map[string]string {
	opts := options(t, mst)
	opts[kubernetes.OptionCoordinatorServiceAccount] = coordinatorAccount
	return opts
}

func newCoordinatorParams(opts map[string]string, mst string) runner.CoordinatorParams {
	return runner.CoordinatorParams{
		Options: opts, ID: "coordtest-" + runner.RandomHex(4), Deadline: time.Hour,
		MST: []string{mst}, MSTVersion: testVersion,
	}
}

// podJSON is what the tests read of a pod.
type podJSON struct {
	Metadata struct {
		Labels      map[string]string
		Annotations map[string]string
	}
	Spec struct {
		RestartPolicy                string
		ServiceAccountName           string
		AutomountServiceAccountToken *bool
		ActiveDeadlineSeconds        int64
		Containers                   []struct {
			Name    string
			Image   string
			Command []string
		}
	}
}

// TestCoordinatorPod creates a coordinator pod and checks its manifest,
// its channel, that Leftovers lists it, and that Finish, run as its
// service account, deletes it.
func TestCoordinatorPod(t *testing.T) {
	mst := needCluster(t)
	applyRole(t)
	opts := coordinatorOptions(t, mst)
	p := newCoordinatorParams(opts, mst)
	m, err := kubernetes.CreateCoordinator(t.Context(), p)
	if err != nil {
		t.Fatalf("CreateCoordinator = %v", err)
	}
	t.Cleanup(func() {
		if err := m.Dispose(context.Background()); err != nil {
			t.Errorf("Dispose = %v", err)
		}
	})
	name := strings.TrimPrefix(m.ID(), testNamespace+"/")
	if name != "mst-coordinator-"+p.ID {
		t.Fatalf("ID() = %q, want %s/mst-coordinator-%s", m.ID(), testNamespace, p.ID)
	}

	t.Run("manifest", func(t *testing.T) {
		out, err := kc(t, "", "get", "pod", name, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		var got podJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		if s.ServiceAccountName != coordinatorAccount || s.AutomountServiceAccountToken == nil || !*s.AutomountServiceAccountToken ||
			s.ActiveDeadlineSeconds != 3600 || s.RestartPolicy != "Never" {
			t.Errorf("spec: account %q, token mounted %v, activeDeadlineSeconds %d, restartPolicy %q; want %s, true, 3600, Never",
				s.ServiceAccountName, s.AutomountServiceAccountToken, s.ActiveDeadlineSeconds, s.RestartPolicy, coordinatorAccount)
		}
		l := got.Metadata.Labels
		if l[kubernetes.LabelCoordinator] != p.ID || l[kubernetes.LabelVersion] != testVersion || l[kubernetes.LabelRun] != "" {
			t.Errorf("labels = %v, want %s=%s and %s=%s only", l, kubernetes.LabelCoordinator, p.ID, kubernetes.LabelVersion, testVersion)
		}
		if len(s.Containers) != 1 || s.Containers[0].Image != opts[kubernetes.OptionImage] ||
			!slices.Equal(s.Containers[0].Command, []string{mst, "runner", "idle", "--deadline", "1h0m0s"}) {
			t.Errorf("containers = %+v, want one of the image %s running mst runner idle --deadline 1h0m0s", s.Containers, opts[kubernetes.OptionImage])
		}
	})

	t.Run("mst", func(t *testing.T) {
		var out, errb bytes.Buffer
		if err := m.Exec(t.Context(), append(m.MST(), "version"), strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("Exec mst version = %v\n%s", err, errb.String())
		}
		if got := strings.TrimSpace(out.String()); got != "mst "+testVersion {
			t.Errorf("mst version in the pod = %q, want mst %s", got, testVersion)
		}
	})

	t.Run("copy", func(t *testing.T) {
		src := t.TempDir()
		files := map[string]string{"detach.json": `{"id":"x"}` + "\n", "eval/eval.yaml": "cases: []\n"}
		for n, body := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(src, n)), 0o755)
			if err := os.WriteFile(filepath.Join(src, n), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		remote := m.WorkDir() + "/detached/" + p.ID
		if err := m.CopyTo(t.Context(), src, remote); err != nil {
			t.Fatalf("CopyTo = %v", err)
		}
		back := filepath.Join(t.TempDir(), "back")
		if err := m.CopyFrom(t.Context(), remote, back); err != nil {
			t.Fatalf("CopyFrom = %v", err)
		}
		for n, body := range files {
			if got, err := os.ReadFile(filepath.Join(back, n)); err != nil || string(got) != body {
				t.Errorf("%s came back as %q, %v; want %q", n, got, err, body)
			}
		}
	})

	t.Run("identity", func(t *testing.T) {
		if id := m.Identity(); !strings.Contains(id, coordinatorAccount) || !strings.Contains(id, testNamespace) {
			t.Errorf("Identity() = %q, want the account and the namespace", id)
		}
		for _, kv := range m.Env() {
			if strings.HasPrefix(kv, "KUBECONFIG=") {
				t.Errorf("Env() = %q sets KUBECONFIG", m.Env())
			}
		}
	})

	t.Run("leftovers", func(t *testing.T) {
		want := runner.Leftover{ID: name, Run: p.ID, Shard: -1}
		for _, id := range []string{p.ID, ""} {
			found, err := kubernetes.Leftovers(t.Context(), opts, id)
			if err != nil {
				t.Fatalf("Leftovers(%q) = %v", id, err)
			}
			if !slices.ContainsFunc(found, func(l runner.Leftover) bool {
				return l.ID == want.ID && l.Run == want.Run && l.Shard == -1 && strings.HasPrefix(l.Detail, "coordinator: ")
			}) {
				t.Errorf("Leftovers(%q) = %+v, want the coordinator pod %+v", id, found, want)
			}
		}
		// A run's id finds no coordinator pod.
		found, err := kubernetes.Leftovers(t.Context(), opts, "some-other-run")
		if err != nil || len(found) != 0 {
			t.Errorf("Leftovers of another run = %+v, %v; want none", found, err)
		}
	})

	t.Run("finish", func(t *testing.T) {
		argv := m.Finish()
		// Run here, as the pod's service account, with the pod's
		// environment on top: what the coordinator does in the pod.
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(append(os.Environ(), "KUBECONFIG="+asCoordinator(t)), m.Env()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("Finish %q as %s = %v\n%s", argv, coordinatorAccount, err, out)
		}
		waitDeleted(t, name)
		if err := m.Dispose(t.Context()); err != nil {
			t.Errorf("Dispose after Finish = %v, want nil", err)
		}
	})
}

// TestCoordinatorDispose checks that Dispose deletes the pod, and that a
// second Dispose is no error.
func TestCoordinatorDispose(t *testing.T) {
	mst := needCluster(t)
	applyRole(t)
	p := newCoordinatorParams(coordinatorOptions(t, mst), mst)
	m, err := kubernetes.CreateCoordinator(t.Context(), p)
	if err != nil {
		t.Fatalf("CreateCoordinator = %v", err)
	}
	if err := m.Dispose(t.Context()); err != nil {
		t.Fatalf("Dispose = %v", err)
	}
	waitDeleted(t, "mst-coordinator-"+p.ID)
	if err := m.Dispose(t.Context()); err != nil {
		t.Errorf("a second Dispose = %v, want nil", err)
	}
}

// TestCoordinatorRefusals checks that a coordinator pod is refused, with a
// message that says what to do, and that none is left behind: without the
// service account option or an image; with an account that does not
// exist; and with an image whose mst is another version.
func TestCoordinatorRefusals(t *testing.T) {
	mst := needCluster(t)
	applyRole(t)
	for _, tt := range []struct {
		name    string
		change  func(p *runner.CoordinatorParams)
		wantErr []string
	}{
		{"no account", func(p *runner.CoordinatorParams) { delete(p.Options, kubernetes.OptionCoordinatorServiceAccount) },
			[]string{kubernetes.OptionCoordinatorServiceAccount + "=NAME", "never copied"}},
		{"no image", func(p *runner.CoordinatorParams) { delete(p.Options, kubernetes.OptionImage) },
			[]string{kubernetes.OptionCoordinatorImage + "=REF", "kubectl"}},
		{"unknown account", func(p *runner.CoordinatorParams) {
			p.Options[kubernetes.OptionCoordinatorServiceAccount] = "mst-nobody"
		},
			[]string{"mst-nobody is not in the namespace " + testNamespace, "docs/kubernetes.md"}},
		{"other version", func(p *runner.CoordinatorParams) { p.MSTVersion = "9.9.9" },
			[]string{"holds mst " + testVersion, "coordinator is mst 9.9.9"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newCoordinatorParams(coordinatorOptions(t, mst), mst)
			tt.change(&p)
			m, err := kubernetes.CreateCoordinator(t.Context(), p)
			if err == nil {
				m.Dispose(t.Context())
				t.Fatalf("CreateCoordinator = nil error, want a refusal")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CreateCoordinator = %v, want it to say %q", err, w)
				}
			}
			waitDeleted(t, "mst-coordinator-"+p.ID)
			noCoordinatorPod(t, p.ID)
		})
	}
}

// TestCoordinatorRole checks that the Role of docs/kubernetes.md lets the
// coordinator's service account do what the runner does in the pod (list
// pods, create a worker's pod and wait for it, exec into it with stdin,
// copy both ways, list and delete it), and denies it what it does not need.
func TestCoordinatorRole(t *testing.T) {
	mst := needCluster(t)
	applyRole(t)
	opts := options(t, mst)
	opts[kubernetes.OptionKubeconfig] = asCoordinator(t)
	r, err := kubernetes.New(t.Context(), runner.Params{Options: opts, MSTVersion: testVersion})
	if err != nil {
		t.Fatalf("New as %s = %v", coordinatorAccount, err)
	}
	run := "role-" + runner.RandomHex(3)
	m, err := kubernetes.CreatePod(t.Context(), r, run, 0)
	if err != nil {
		t.Fatalf("creating a worker's pod as %s: %v", coordinatorAccount, err)
	}
	var out bytes.Buffer
	if err := m.Exec(t.Context(), []string{"cat"}, strings.NewReader("through exec\n"), &out, &bytes.Buffer{}); err != nil || out.String() != "through exec\n" {
		t.Errorf("Exec cat as %s = %q, %v", coordinatorAccount, out.String(), err)
	}
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	if err := m.CopyTo(t.Context(), src, m.WorkDir()+"/bundle"); err != nil {
		t.Errorf("CopyTo as %s = %v", coordinatorAccount, err)
	}
	if err := m.CopyFrom(t.Context(), m.WorkDir()+"/bundle/f", filepath.Join(t.TempDir(), "f")); err != nil {
		t.Errorf("CopyFrom as %s = %v", coordinatorAccount, err)
	}
	found, err := kubernetes.Leftovers(t.Context(), opts, run)
	if err != nil || len(found) != 1 {
		t.Fatalf("Leftovers as %s = %+v, %v; want the one pod", coordinatorAccount, found, err)
	}
	if err := kubernetes.Remove(t.Context(), opts, found[0]); err != nil {
		t.Errorf("Remove as %s = %v", coordinatorAccount, err)
	}
	waitDeleted(t, found[0].ID)

	as := "--as=system:serviceaccount:" + testNamespace + ":" + coordinatorAccount
	for _, denied := range [][]string{
		{"get", "secrets"},
		{"list", "pods", "--namespace", "kube-system"},
		{"create", "deployments"},
		{"patch", "pods"},
		{"get", "pods", "--subresource=log"},
		{"create", "serviceaccounts", "--subresource=token"},
		{"create", "pods", "--subresource=ephemeralcontainers"},
	} {
		out, _ := kc(t, "", append([]string{"auth", "can-i", as}, denied...)...)
		if strings.TrimSpace(out) != "no" {
			t.Errorf("kubectl auth can-i %s as %s = %q, want no", strings.Join(denied, " "), coordinatorAccount, out)
		}
	}
}
