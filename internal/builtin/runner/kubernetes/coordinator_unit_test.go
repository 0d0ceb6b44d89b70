package kubernetes

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/runner"
)

func TestCoordinatorName(t *testing.T) {
	long := strings.Repeat("a", 80)
	cases := map[string]string{
		"ev-20260101-120000-abc123": "mst-coordinator-ev-20260101-120000-abc123",
		"My_Eval.v2--x":             "mst-coordinator-my-eval-v2-x",
		"--x--":                     "mst-coordinator-x",
	}
	for id, want := range cases {
		if got := coordinatorName(id); got != want {
			t.Errorf("coordinatorName(%q) = %q, want %q", id, got, want)
		}
	}
	// Every id gives a valid pod name (a DNS label) with the prefix.
	for _, id := range []string{"", "___", "ÄÖÜ", long, long + "-", strings.Repeat("é-", 50), "a/b", "x" + strings.Repeat("_", 70) + "y"} {
		n := coordinatorName(id)
		if len(n) > 63 || !dnsLabel.MatchString(n) || !strings.HasPrefix(n, "mst-coordinator-") {
			t.Errorf("coordinatorName(%q) = %q: not a pod name of at most 63 characters with the prefix", id, n)
		}
	}
	// Ids that differ only past the cut get different names.
	if coordinatorName(long) == coordinatorName(long+"b") {
		t.Errorf("two long ids share the name %q", coordinatorName(long))
	}
}

func TestCoordinatorManifest(t *testing.T) {
	set := settings{namespace: "evals", mst: "/usr/local/bin/mst", workDir: "/data", coordinatorServiceAccount: "mst-coordinator",
		// The workers' account and the context options stay out of the
		// coordinator's pod.
		serviceAccount: "mst-worker", kubeconfig: "/home/me/.kube/config", context: "prod"}
	for _, tt := range []struct {
		name, id, version string
		deadline          time.Duration
		wantSecs          int64
		wantIdle          string
	}{
		{name: "hours", id: "ev-20260101-120000-abc123", version: "2.0.0", deadline: 24 * time.Hour, wantSecs: 86400, wantIdle: "24h0m0s"},
		{name: "part of a second rounds up", id: "ev-1", version: "2.0.0-rc.1+dirty", deadline: 90*time.Second + time.Millisecond, wantSecs: 91, wantIdle: "1m31s"},
		{name: "odd id", id: "Eval/with spaces:" + strings.Repeat("z", 80), version: "1", deadline: time.Minute, wantSecs: 60, wantIdle: "1m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := coordinatorName(tt.id)
			var got map[string]any
			if err := json.Unmarshal(coordinatorManifest(name, tt.id, set, "reg.example/coord:2", tt.version, tt.deadline), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{
					"name":        name,
					"labels":      map[string]any{LabelCoordinator: labelValue(tt.id), LabelVersion: labelValue(tt.version)},
					"annotations": map[string]any{AnnotationCoordinator: tt.id},
				},
				"spec": map[string]any{
					"restartPolicy":                 "Never",
					"activeDeadlineSeconds":         float64(tt.wantSecs),
					"serviceAccountName":            "mst-coordinator",
					"automountServiceAccountToken":  true,
					"terminationGracePeriodSeconds": float64(10),
					"securityContext":               restrictedPod(DefaultUser, DefaultUser),
					"containers": []any{map[string]any{
						"name":            ContainerName,
						"image":           "reg.example/coord:2",
						"command":         []any{"/usr/local/bin/mst", "runner", "idle", "--deadline", tt.wantIdle},
						"env":             []any{map[string]any{"name": "HOME", "value": "/tmp"}},
						"securityContext": restrictedContainer(),
						"volumeMounts": []any{
							map[string]any{"name": volumeWork, "mountPath": "/data"},
							map[string]any{"name": volumeTmp, "mountPath": "/tmp"},
						},
					}},
					"volumes": []any{
						map[string]any{"name": volumeWork, "emptyDir": map[string]any{}},
						map[string]any{"name": volumeTmp, "emptyDir": map[string]any{}},
					},
				},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("coordinatorManifest (-want +got):\n%s", diff)
			}
			for k, v := range got["metadata"].(map[string]any)["labels"].(map[string]any) {
				if s := v.(string); len(s) > 63 || (s != "" && labelValue(s) != s) {
					t.Errorf("label %s=%q is not a valid label value", k, s)
				}
			}
		})
	}
	// A worker's manifest has the machines' deadline, when it is given
	// one: Kubernetes ends the pod, and its idle process exits, then.
	if b := podManifest("mst-r-0", podSpec{run: "r", attempt: 1}, set, "img", "1"); strings.Contains(string(b), "activeDeadlineSeconds") {
		t.Errorf("a worker pod given no deadline has one: %s", b)
	}
	b := string(podManifest("mst-r-0", podSpec{run: "r", attempt: 1, deadline: 72*time.Hour + 500*time.Millisecond}, set, "img", "1"))
	if !strings.Contains(b, `"activeDeadlineSeconds":259201`) || !strings.Contains(b, `"idle","--deadline","72h0m0.5s"`) {
		t.Errorf("a worker pod's manifest lacks its deadline: %s", b)
	}
}

func TestCoordinatorImage(t *testing.T) {
	for _, tt := range []struct {
		name    string
		set     settings
		want    string
		wantErr []string
	}{
		{name: "no account", set: settings{namespace: "evals", mst: "/mst", coordinatorImage: "c"}, wantErr: []string{OptionCoordinatorServiceAccount + "=NAME", "evals", "docs/kubernetes.md", "never copied"}},
		{name: "no image", set: settings{namespace: "evals", mst: "/mst", coordinatorServiceAccount: "sa"}, wantErr: []string{OptionCoordinatorImage + "=REF", "kubectl", "/mst"}},
		{name: "coordinator image", set: settings{coordinatorServiceAccount: "sa", image: "w", coordinatorImage: "c"}, want: "c"},
		{name: "worker image", set: settings{coordinatorServiceAccount: "sa", image: "w"}, want: "w"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := coordinatorImage(tt.set)
			if tt.wantErr != nil {
				for _, w := range tt.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("coordinatorImage = %q, %v; want an error with %q", got, err, w)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("coordinatorImage = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestInClusterSettings checks that in a coordinator pod (EnvInCluster
// set) the kubeconfig and context options, which name the launching
// machine's, are left out, and that elsewhere they are kept.
func TestInClusterSettings(t *testing.T) {
	opts := map[string]string{OptionNamespace: "evals", OptionKubeconfig: "/home/me/.kube/config", OptionContext: "prod"}
	set, err := parseSettings(opts)
	if err != nil || set.kubeconfig != "/home/me/.kube/config" || set.context != "prod" {
		t.Fatalf("parseSettings = %+v, %v; want the kubeconfig and context kept", set, err)
	}
	for _, v := range []string{"0", "", "true"} {
		t.Setenv(EnvInCluster, v)
		if set, _ := parseSettings(opts); set.kubeconfig == "" || set.context == "" {
			t.Errorf("with %s=%q the options were dropped: %+v", EnvInCluster, v, set)
		}
	}
	t.Setenv(EnvInCluster, "1")
	set, err = parseSettings(opts)
	if err != nil || set.kubeconfig != "" || set.context != "" || set.namespace != "evals" {
		t.Errorf("in the pod, parseSettings = %+v, %v; want the namespace only", set, err)
	}
	k := &kubectl{set: set}
	if a := k.args("get", "pods"); slices.Contains(a, "--kubeconfig") || slices.Contains(a, "--context") {
		t.Errorf("in the pod, kubectl gets %q", a)
	}
}

func TestCoordinatorPodCommands(t *testing.T) {
	set := settings{namespace: "evals", mst: "/mst", workDir: "/work", kubeconfig: "/home/me/.kube/config", context: "prod", coordinatorServiceAccount: "mst-coordinator"}
	c := &coordinatorPod{pod: pod{name: "mst-coordinator-x", set: set}}
	want := []string{"kubectl", "--namespace", "evals", "delete", "pod", "mst-coordinator-x", "--wait=false", "--ignore-not-found"}
	if diff := cmp.Diff(want, c.Finish()); diff != "" {
		t.Errorf("Finish (-want +got):\n%s", diff)
	}
	env := c.Env()
	if !slices.Contains(env, EnvInCluster+"=1") {
		t.Errorf("Env() = %q, want %s=1", env, EnvInCluster)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.Contains(kv, set.kubeconfig) {
			t.Errorf("Env() = %q names a kubeconfig", env)
		}
	}
	id := c.Identity()
	for _, w := range []string{"mst-coordinator", "evals", "mst-coordinator-x", "kubeconfig is not copied"} {
		if !strings.Contains(id, w) {
			t.Errorf("Identity() = %q, want it to say %q", id, w)
		}
	}
	if c.ID() != "evals/mst-coordinator-x" || c.WorkDir() != "/work" || !slices.Equal(c.MST(), []string{"/mst"}) {
		t.Errorf("ID, WorkDir, MST = %q, %q, %q", c.ID(), c.WorkDir(), c.MST())
	}
	var _ runner.CoordinatorMachine = c
}

func TestParseCoordinatorLeftovers(t *testing.T) {
	out := `{"items":[
	  {"metadata":{"name":"mst-coordinator-b","labels":{"mst.coordinator":"b-cut"},"annotations":{"mst.coordinator":"b/full"},"creationTimestamp":"2026-01-01T00:00:00Z"},"status":{"phase":"Running"}},
	  {"metadata":{"name":"mst-coordinator-a","labels":{"mst.coordinator":"a"},"creationTimestamp":"2026-01-02T00:00:00Z"},"status":{"phase":"Failed"}}]}`
	got, err := parseCoordinatorLeftovers([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []runner.Leftover{
		{ID: "mst-coordinator-a", Run: "a", Shard: -1, Detail: "coordinator: Failed, created 2026-01-02T00:00:00Z"},
		{ID: "mst-coordinator-b", Run: "b/full", Shard: -1, Detail: "coordinator: Running, created 2026-01-01T00:00:00Z"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseCoordinatorLeftovers (-want +got):\n%s", diff)
	}
	if _, err := parseCoordinatorLeftovers([]byte("[")); err == nil {
		t.Error("parseCoordinatorLeftovers of bad JSON = nil error")
	}
}
