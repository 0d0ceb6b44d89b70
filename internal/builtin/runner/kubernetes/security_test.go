package kubernetes_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/runner/kubernetes"
	"github.com/mst-eval/mst/runner"
)

// restrictedNamespace makes a namespace of its own that enforces the
// restricted Pod Security Standard, with the coordinator's account of
// docs/kubernetes.md in it, and deletes it when the test ends. The API
// server's PodSecurity admission refuses pods there as on any cluster;
// kwok plays no part in that.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := "mst-restricted-" + runner.RandomHex(3)
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n", ns)
	if _, err := kc(t, manifest, "create", "--filename", "-"); err != nil {
		t.Fatalf("creating the namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if _, err := kc(t, "", "delete", "namespace", ns, "--wait=false"); err != nil {
			t.Errorf("deleting the namespace %s: %v", ns, err)
		}
	})
	// No pod is admitted before the namespace's default service account
	// exists, which a controller makes.
	if _, err := kc(t, "", "--namespace", ns, "wait", "--for=create", "serviceaccount/default", "--timeout=5m"); err != nil {
		t.Fatalf("the namespace %s got no default service account: %v", ns, err)
	}
	if _, err := kc(t, docsRoleIn(t, ns), "--namespace", ns, "apply", "--filename", "-"); err != nil {
		t.Fatalf("kubectl apply of the Role in docs/kubernetes.md in %s: %v", ns, err)
	}
	return ns
}

// TestRestrictedProfile checks that a namespace enforcing the restricted
// profile admits the workers' pods and the coordinator's as the runner
// makes them by default; that it refuses a worker's pod with
// podSecurity=baseline; and that it refuses the default manifest with any
// one of the fields the profile asks for left out, so each of them is
// needed.
func TestRestrictedProfile(t *testing.T) {
	mst := needCluster(t)
	ns := restrictedNamespace(t)
	opts := options(t, mst)
	opts[kubernetes.OptionNamespace] = ns

	t.Run("worker", func(t *testing.T) {
		r, err := kubernetes.New(t.Context(), runner.Params{Options: opts, MSTVersion: testVersion})
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		m, err := kubernetes.CreatePod(t.Context(), r, "restricted-"+runner.RandomHex(3), 0)
		if err != nil {
			t.Fatalf("a worker's pod in the restricted namespace: %v", err)
		}
		defer m.Remove(t.Context())
		// kwok's pods report no image digest: the reference is recorded.
		if got := m.Image(); got != opts[kubernetes.OptionImage] {
			t.Errorf("Image() = %q, want %q as named (kwok reports no digest)", got, opts[kubernetes.OptionImage])
		}
		out, err := kc(t, "", "--namespace", ns, "get", "pod", strings.TrimPrefix(m.ID(), ns+"/"), "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		var pod struct {
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot bool
					RunAsUser    int64
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &pod); err != nil {
			t.Fatal(err)
		}
		if sc := pod.Spec.SecurityContext; !sc.RunAsNonRoot || sc.RunAsUser != kubernetes.DefaultUser {
			t.Errorf("the pod's securityContext = %+v, want runAsNonRoot and runAsUser %d", sc, kubernetes.DefaultUser)
		}
	})

	t.Run("coordinator", func(t *testing.T) {
		copts := coordinatorOptions(t, mst)
		copts[kubernetes.OptionNamespace] = ns
		m, err := kubernetes.CreateCoordinator(t.Context(), newCoordinatorParams(copts, mst))
		if err != nil {
			t.Fatalf("a coordinator's pod in the restricted namespace: %v", err)
		}
		if err := m.Dispose(t.Context()); err != nil {
			t.Errorf("Dispose = %v", err)
		}
	})

	t.Run("baseline refused", func(t *testing.T) {
		bopts := options(t, mst)
		bopts[kubernetes.OptionNamespace] = ns
		bopts[kubernetes.OptionPodSecurity] = kubernetes.PodSecurityBaseline
		r, err := kubernetes.New(t.Context(), runner.Params{Options: bopts, MSTVersion: testVersion})
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		m, err := kubernetes.CreatePod(t.Context(), r, "baseline-"+runner.RandomHex(3), 0)
		if err == nil {
			m.Remove(t.Context())
			t.Fatal("a baseline pod was admitted in a namespace that enforces restricted")
		}
		if !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
			t.Errorf("CreatePod = %v, want PodSecurity's refusal", err)
		}
	})

	t.Run("each field needed", func(t *testing.T) {
		manifest, err := kubernetes.PodManifest(opts, "fields", opts[kubernetes.OptionImage], testVersion)
		if err != nil {
			t.Fatal(err)
		}
		dryRun := func(m []byte) error {
			_, err := kc(t, string(m), "--namespace", ns, "create", "--dry-run=server", "--filename", "-")
			return err
		}
		if err := dryRun(manifest); err != nil {
			t.Fatalf("the default manifest is refused: %v", err)
		}
		for _, tt := range []struct {
			field string
			drop  func(spec, container map[string]any)
			// refusal is what PodSecurity's message says of it.
			refusal string
		}{
			{"runAsNonRoot", func(s, _ map[string]any) { delete(s["securityContext"].(map[string]any), "runAsNonRoot") }, "runAsNonRoot != true"},
			{"seccompProfile", func(s, _ map[string]any) { delete(s["securityContext"].(map[string]any), "seccompProfile") }, "seccompProfile"},
			{"capabilities", func(_, c map[string]any) { delete(c["securityContext"].(map[string]any), "capabilities") }, "unrestricted capabilities"},
			{"allowPrivilegeEscalation", func(_, c map[string]any) {
				delete(c["securityContext"].(map[string]any), "allowPrivilegeEscalation")
			}, "allowPrivilegeEscalation != false"},
		} {
			t.Run(tt.field, func(t *testing.T) {
				var m map[string]any
				if err := json.Unmarshal(manifest, &m); err != nil {
					t.Fatal(err)
				}
				spec := m["spec"].(map[string]any)
				tt.drop(spec, spec["containers"].([]any)[0].(map[string]any))
				b, _ := json.Marshal(m)
				err := dryRun(b)
				if err == nil || !strings.Contains(err.Error(), tt.refusal) {
					t.Errorf("without %s, kubectl create --dry-run=server = %v; want PodSecurity's refusal with %q", tt.field, err, tt.refusal)
				}
			})
		}
	})
}

// TestPlacementAdmitted checks that the API server takes the fields the
// placement options write (resources, node selector, tolerations, pull
// secrets), through a server-side dry run of a worker's manifest.
func TestPlacementAdmitted(t *testing.T) {
	mst := needCluster(t)
	opts := options(t, mst)
	for k, v := range map[string]string{
		kubernetes.OptionRunAsUser: "1000:3000", kubernetes.OptionRequests: "cpu=250m,memory=256Mi,ephemeral-storage=1Gi",
		kubernetes.OptionLimits: "cpu=1.5,memory=1Gi", kubernetes.OptionNodeSelector: "kubernetes.io/os=linux,example.com/pool=evals",
		kubernetes.OptionTolerations: "dedicated=evals:NoSchedule,example.com/spot,gpu:NoExecute", kubernetes.OptionImagePullSecrets: "regcred,mirror",
	} {
		opts[k] = v
	}
	manifest, err := kubernetes.PodManifest(opts, "placed", "reg.example/w:1", testVersion)
	if err != nil {
		t.Fatal(err)
	}
	out, err := kc(t, string(manifest), "create", "--dry-run=server", "--filename", "-", "--output", "json")
	if err != nil {
		t.Fatalf("the API server refused the manifest: %v\n%s", err, manifest)
	}
	var pod struct {
		Spec struct {
			NodeSelector     map[string]string
			Tolerations      []struct{ Key, Operator, Value, Effect string }
			ImagePullSecrets []struct{ Name string }
			SecurityContext  struct{ RunAsUser, RunAsGroup int64 }
			Containers       []struct {
				Resources struct{ Requests, Limits map[string]string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &pod); err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	if s.NodeSelector["example.com/pool"] != "evals" || s.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector = %v", s.NodeSelector)
	}
	// The API server adds its own tolerations (not-ready, unreachable).
	var keys []string
	for _, tol := range s.Tolerations {
		keys = append(keys, tol.Key+"/"+tol.Operator+"/"+tol.Value+"/"+tol.Effect)
	}
	for _, want := range []string{"dedicated/Equal/evals/NoSchedule", "example.com/spot/Exists//", "gpu/Exists//NoExecute"} {
		if !slices.Contains(keys, want) {
			t.Errorf("tolerations = %q, want %q among them", keys, want)
		}
	}
	if len(s.ImagePullSecrets) != 2 || s.ImagePullSecrets[0].Name != "regcred" || s.ImagePullSecrets[1].Name != "mirror" {
		t.Errorf("imagePullSecrets = %+v", s.ImagePullSecrets)
	}
	if s.SecurityContext.RunAsUser != 1000 || s.SecurityContext.RunAsGroup != 3000 {
		t.Errorf("securityContext = %+v, want uid 1000, gid 3000", s.SecurityContext)
	}
	if r := s.Containers[0].Resources; r.Requests["memory"] != "256Mi" || r.Requests["ephemeral-storage"] != "1Gi" || r.Limits["cpu"] != "1500m" {
		t.Errorf("resources = %+v", r)
	}
}

// TestMissingRight checks, for each right the runner uses, that New as a
// service account whose Role lacks only that right refuses to start and
// names it, the can-i command that shows it and the Role to apply.
func TestMissingRight(t *testing.T) {
	mst := needCluster(t)
	// One account, Role and binding for each right, from the Role of
	// docs/kubernetes.md with that one verb taken out, applied at once.
	var docs []string
	accounts := map[kubernetes.Right]string{}
	for i, r := range kubernetes.Rights {
		account := fmt.Sprintf("mst-lacks-%d", i)
		accounts[r] = account
		role := strings.NewReplacer(coordinatorAccount, account, "name: mst-runner\n", "name: "+account+"\n").Replace(docsRole(t))
		lacking, err := withoutVerb(role, r)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, lacking)
	}
	all := strings.Join(docs, "\n---\n")
	if _, err := kc(t, all, "apply", "--filename", "-"); err != nil {
		t.Fatalf("applying the Roles: %v", err)
	}
	t.Cleanup(func() {
		if _, err := kc(t, all, "delete", "--filename", "-", "--ignore-not-found"); err != nil {
			t.Errorf("deleting the Roles: %v", err)
		}
	})
	for _, r := range kubernetes.Rights {
		t.Run(strings.ReplaceAll(r.String(), " ", "-"), func(t *testing.T) {
			as := "--as=system:serviceaccount:" + testNamespace + ":" + accounts[r]
			// The authorizer sees a new binding once its cache has it:
			// wait for a right the account has to be granted.
			granted := kubernetes.Rights[0]
			if granted == r {
				granted = kubernetes.Rights[1]
			}
			waitGranted(t, as, granted)
			opts := options(t, mst)
			opts[kubernetes.OptionKubeconfig] = asAccount(t, accounts[r])
			_, err := kubernetes.New(t.Context(), runner.Params{Options: opts, MSTVersion: testVersion})
			if err == nil {
				t.Fatalf("New without %s = nil error, want a refusal", r)
			}
			canI := "kubectl auth can-i " + r.Verb + " " + r.Resource
			if res, sub, ok := strings.Cut(r.Resource, "/"); ok {
				canI = "kubectl auth can-i " + r.Verb + " " + res + " --subresource=" + sub
			}
			for _, w := range []string{"may not " + r.String() + " in the namespace " + testNamespace, canI + " -n " + testNamespace, "docs/kubernetes.md"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New without %s = %v\nwant it to say %q", r, err, w)
				}
			}
		})
	}
}

// TestNoRights checks that New as a service account with no Role names
// every right it lacks, in one message.
func TestNoRights(t *testing.T) {
	mst := needCluster(t)
	opts := options(t, mst)
	opts[kubernetes.OptionKubeconfig] = asAccount(t, "mst-nobody")
	_, err := kubernetes.New(t.Context(), runner.Params{Options: opts, MSTVersion: testVersion})
	if err == nil {
		t.Fatal("New with no rights = nil error")
	}
	var rights []string
	for _, r := range kubernetes.Rights {
		rights = append(rights, r.String())
	}
	if want := "may not " + strings.Join(rights, ", ") + " in the namespace"; !strings.Contains(err.Error(), want) {
		t.Errorf("New with no rights = %v\nwant it to say %q", err, want)
	}
}

// withoutVerb is the YAML of docs/kubernetes.md's account, Role and
// binding with the verb of r taken out of the rule for r's resource.
func withoutVerb(role string, r kubernetes.Right) (string, error) {
	lines := strings.Split(role, "\n")
	resource := `resources: ["` + r.Resource + `"]`
	for i, l := range lines {
		if strings.TrimSpace(l) != resource || i+1 >= len(lines) || !strings.Contains(lines[i+1], "verbs:") {
			continue
		}
		verb := `"` + r.Verb + `"`
		next := strings.NewReplacer(verb+", ", "", ", "+verb, "", verb, "").Replace(lines[i+1])
		if next == lines[i+1] {
			return "", fmt.Errorf("the rule for %s in docs/kubernetes.md has no verb %s: %s", r.Resource, r.Verb, lines[i+1])
		}
		lines[i+1] = next
		return strings.Join(lines, "\n"), nil
	}
	return "", fmt.Errorf("docs/kubernetes.md's Role has no rule with %s followed by its verbs", resource)
}

// waitGranted waits until the API server says the impersonated account
// (as) has the right r (a resource without a subresource): the RBAC
// authorizer learns of a new binding through its cache.
func waitGranted(t *testing.T, as string, r kubernetes.Right) {
	t.Helper()
	for range 200 {
		if out, _ := kc(t, "", "auth", "can-i", as, r.Verb, r.Resource); strings.TrimSpace(out) == "yes" {
			return
		}
	}
	t.Fatalf("%s never got %s", as, r)
}

// TestMissingTar checks that a pod whose image has no tar where the tar
// option says is refused at its start, saying so and how to fix it, and
// is deleted.
func TestMissingTar(t *testing.T) {
	mst := needCluster(t)
	opts := options(t, mst)
	opts[kubernetes.OptionTar] = "/no/such/tar"
	r, err := kubernetes.New(t.Context(), runner.Params{Options: opts, MSTVersion: testVersion})
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	run := "notar-" + runner.RandomHex(3)
	m, err := kubernetes.CreatePod(t.Context(), r, run, 0)
	if err == nil {
		m.Remove(t.Context())
		t.Fatal("CreatePod with no tar in the image = nil error")
	}
	for _, w := range []string{`no tar at "/no/such/tar"`, "--runner-option tar=PATH", opts[kubernetes.OptionImage]} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("CreatePod = %v\nwant it to say %q", err, w)
		}
	}
	found, err := kubernetes.Leftovers(t.Context(), opts, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range found {
		waitDeleted(t, l.ID)
	}
}
