package kubernetes

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/runner"
)

func TestParseSettings(t *testing.T) {
	tests := []struct {
		name    string
		options map[string]string
		want    settings
		wantErr string
	}{
		{
			name:    "defaults",
			options: map[string]string{"namespace": "evals"},
			want:    settings{namespace: "evals", mst: "/mst", workDir: "/work", podTimeout: 2 * time.Minute, tar: "tar", placement: placement{podSecurity: "restricted"}},
		},
		{
			name: "every option",
			options: map[string]string{
				"namespace": "evals", "image": "reg.example/mst:2", "mst": "/usr/local/bin/mst", "context": "prod",
				"kubeconfig": "/home/me/.kube/other", "serviceAccount": "mst-worker", "workDir": "/data/work/",
				"podTimeout": "5m", "tar": "/bin/busybox-tar", "env": "/usr/bin/env",
			},
			want: settings{
				namespace: "evals", image: "reg.example/mst:2", mst: "/usr/local/bin/mst", context: "prod",
				kubeconfig: "/home/me/.kube/other", serviceAccount: "mst-worker", workDir: "/data/work",
				podTimeout: 5 * time.Minute, tar: "/bin/busybox-tar", env: "/usr/bin/env", placement: placement{podSecurity: "restricted"},
			},
		},
		{name: "no namespace", options: map[string]string{}, wantErr: "no namespace"},
		{name: "bad namespace", options: map[string]string{"namespace": "Evals_1"}, wantErr: "namespace=Evals_1"},
		{name: "bad account", options: map[string]string{"namespace": "e", "serviceAccount": "A B"}, wantErr: "serviceAccount=A B"},
		{name: "relative mst", options: map[string]string{"namespace": "e", "mst": "mst"}, wantErr: "absolute paths"},
		{name: "relative workDir", options: map[string]string{"namespace": "e", "workDir": "work"}, wantErr: "absolute paths"},
		{name: "root workDir", options: map[string]string{"namespace": "e", "workDir": "/"}, wantErr: "cannot be the root"},
		{name: "bad timeout", options: map[string]string{"namespace": "e", "podTimeout": "soon"}, wantErr: "podTimeout=soon"},
		{name: "zero timeout", options: map[string]string{"namespace": "e", "podTimeout": "0s"}, wantErr: "podTimeout=0s"},
		{name: "bad placement", options: map[string]string{"namespace": "e", "limits": "cpu=lots"}, wantErr: "limits=cpu=lots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSettings(tt.options)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseSettings(%v) = %v, want an error with %q", tt.options, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseSettings(%v) = %v", tt.options, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(settings{}, placement{})); diff != "" {
				t.Errorf("parseSettings(%v) (-want +got):\n%s", tt.options, diff)
			}
		})
	}
}

func TestDefinition(t *testing.T) {
	d := Definition()
	if d.Name != "kubernetes" || d.OS != "linux" || d.MaxShards != MaxShards || d.New == nil || d.Leftovers == nil || d.Remove == nil || d.Coordinator == nil {
		t.Errorf("Definition() = %+v", d)
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(d.Options, &schema); err != nil {
		t.Fatalf("the options schema is not JSON: %v", err)
	}
	var names []string
	for n := range schema.Properties {
		names = append(names, n)
	}
	want := []string{OptionContext, OptionCoordinatorImage, OptionCoordinatorServiceAccount, OptionEnv, OptionImage, OptionImagePullSecrets, OptionKubeconfig, OptionLimits, OptionMST,
		OptionNamespace, OptionNodeSelector, OptionPodSecurity, OptionPodTimeout, OptionRequests, OptionRunAsUser, OptionServiceAccount, OptionTar, OptionTolerations, OptionWorkDir}
	sort.Strings(names)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("options in the schema (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"namespace"}, schema.Required); diff != "" {
		t.Errorf("required options (-want +got):\n%s", diff)
	}
}

func TestPodName(t *testing.T) {
	tests := []struct {
		spec podSpec
		want string
	}{
		{podSpec{run: "20261130-075300-ab12", shard: 0, attempt: 1}, "mst-20261130-075300-ab12-0"},
		{podSpec{run: "Run_With.Odd Chars", shard: 3, attempt: 2}, "mst-run-with-odd-chars-3-a2"},
		{podSpec{run: "r", shard: 1, attempt: 1, suffix: "a1b2c3"}, "mst-r-1-a1b2c3"},
		{podSpec{run: strings.Repeat("x", 80), shard: 12, attempt: 1}, "mst-" + strings.Repeat("x", 56) + "-12"},
	}
	for _, tt := range tests {
		if got := podName(tt.spec); got != tt.want {
			t.Errorf("podName(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
		if got := podName(tt.spec); len(got) > 63 {
			t.Errorf("podName(%+v) has %d characters, more than 63", tt.spec, len(got))
		}
	}
}

func TestLabelValue(t *testing.T) {
	tests := map[string]string{
		"20261130-075300-ab12":  "20261130-075300-ab12",
		"0.0.0-dockertest":      "0.0.0-dockertest",
		"v2.0.0+build/7":        "v2.0.0-build-7",
		"-odd-":                 "odd",
		"":                      "",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	}
	for in, want := range tests {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPodManifest(t *testing.T) {
	base := settings{namespace: "evals", mst: "/mst", workDir: "/work", podTimeout: time.Minute, tar: "tar"}
	withAccount := base
	withAccount.serviceAccount, withAccount.mst, withAccount.workDir = "runner-sa", "/opt/mst", "/data"
	pod := func(name, image, mst, work, run, shard, version string, extra map[string]any) map[string]any {
		spec := map[string]any{
			"restartPolicy":                 "Never",
			"automountServiceAccountToken":  false,
			"terminationGracePeriodSeconds": float64(10),
			"securityContext":               restrictedPod(65532, 65532),
			"containers": []any{map[string]any{
				"name":            "worker",
				"image":           image,
				"command":         []any{mst, "runner", "idle"},
				"env":             []any{map[string]any{"name": "HOME", "value": "/tmp"}, map[string]any{"name": "MST_CLIENT_SETUP", "value": clientSetup}},
				"securityContext": restrictedContainer(),
				"volumeMounts": []any{
					map[string]any{"name": "mst-run", "mountPath": "/run/mst"},
					map[string]any{"name": "work", "mountPath": work},
					map[string]any{"name": "tmp", "mountPath": "/tmp"},
				},
			}},
			"volumes": []any{
				map[string]any{"name": "mst-run", "emptyDir": map[string]any{"medium": "Memory"}},
				map[string]any{"name": "work", "emptyDir": map[string]any{}},
				map[string]any{"name": "tmp", "emptyDir": map[string]any{}},
			},
		}
		for k, v := range extra {
			spec[k] = v
		}
		return map[string]any{
			"apiVersion": "v1",
			"kind":       "Pod",
			"metadata": map[string]any{
				"name":        name,
				"labels":      map[string]any{"mst.run": run, "mst.shard": shard, "mst.version": version},
				"annotations": map[string]any{"mst.run": run},
			},
			"spec": spec,
		}
	}
	tests := []struct {
		name    string
		spec    podSpec
		set     settings
		image   string
		version string
		want    map[string]any
		// change, when set, changes want's spec and its container.
		change func(spec, container map[string]any)
	}{
		{
			name: "defaults", spec: podSpec{run: "r1", shard: 2, attempt: 1}, set: base,
			image: "mst-worker:1.2.3", version: "1.2.3",
			want: pod("mst-r1-2", "mst-worker:1.2.3", "/mst", "/work", "r1", "2", "1.2.3", nil),
		},
		{
			name: "service account", spec: podSpec{run: "r2", shard: 0, attempt: 1}, set: withAccount,
			image: "reg.example/w:1", version: "1.2.3",
			want: pod("mst-r2-0", "reg.example/w:1", "/opt/mst", "/data", "r2", "0", "1.2.3",
				map[string]any{"serviceAccountName": "runner-sa", "automountServiceAccountToken": true}),
		},
		{
			name: "restricted, another user, placed", spec: podSpec{run: "r3", shard: 1, attempt: 1},
			set: withPlacement(t, base, map[string]string{
				"runAsUser": "1000:2000", "requests": "cpu=500m,memory=1Gi", "limits": "memory=2Gi",
				"nodeSelector": "pool=evals", "tolerations": "dedicated=evals:NoSchedule,gpu", "imagePullSecrets": "regcred",
			}),
			image: "w", version: "1",
			want: pod("mst-r3-1", "w", "/mst", "/work", "r3", "1", "1", nil),
			change: func(spec, c map[string]any) {
				spec["securityContext"] = restrictedPod(1000, 2000)
				spec["nodeSelector"] = map[string]any{"pool": "evals"}
				spec["tolerations"] = []any{
					map[string]any{"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"},
					map[string]any{"key": "gpu", "operator": "Exists"},
				}
				spec["imagePullSecrets"] = []any{map[string]any{"name": "regcred"}}
				c["resources"] = map[string]any{
					"requests": map[string]any{"cpu": "500m", "memory": "1Gi"},
					"limits":   map[string]any{"memory": "2Gi"},
				}
			},
		},
		{
			name: "baseline", spec: podSpec{run: "r4", shard: 0, attempt: 1},
			set:   withPlacement(t, base, map[string]string{"podSecurity": "baseline"}),
			image: "w", version: "1",
			want: pod("mst-r4-0", "w", "/mst", "/work", "r4", "0", "1", nil),
			change: func(spec, c map[string]any) {
				delete(spec, "securityContext")
				c["securityContext"] = map[string]any{"allowPrivilegeEscalation": false}
			},
		},
		{
			name: "baseline as root", spec: podSpec{run: "r5", shard: 0, attempt: 1},
			set:   withPlacement(t, base, map[string]string{"podSecurity": "baseline", "runAsUser": "0"}),
			image: "w", version: "1",
			want: pod("mst-r5-0", "w", "/mst", "/work", "r5", "0", "1", nil),
			change: func(spec, c map[string]any) {
				spec["securityContext"] = map[string]any{"runAsUser": float64(0), "runAsGroup": float64(0), "fsGroup": float64(0)}
				c["securityContext"] = map[string]any{"allowPrivilegeEscalation": false}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := podManifest(podName(tt.spec), tt.spec, tt.set, tt.image, tt.version)
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("the manifest is not JSON: %v\n%s", err, b)
			}
			if tt.change != nil {
				spec := tt.want["spec"].(map[string]any)
				tt.change(spec, spec["containers"].([]any)[0].(map[string]any))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("podManifest (-want +got):\n%s", diff)
			}
		})
	}
}

// restrictedPod is a pod's securityContext under the restricted profile,
// as JSON decodes it.
func restrictedPod(uid, gid int) map[string]any {
	return map[string]any{
		"runAsNonRoot": true, "runAsUser": float64(uid), "runAsGroup": float64(gid), "fsGroup": float64(gid),
		"seccompProfile": map[string]any{"type": "RuntimeDefault"},
	}
}

// restrictedContainer is a container's securityContext under the
// restricted profile.
func restrictedContainer() map[string]any {
	return map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}}
}

// withPlacement is set with the placement options.
func withPlacement(t *testing.T, set settings, options map[string]string) settings {
	t.Helper()
	p, err := parsePlacement(options)
	if err != nil {
		t.Fatalf("parsePlacement(%v) = %v", options, err)
	}
	set.placement = p
	return set
}

func TestKubectlArgs(t *testing.T) {
	plain := &kubectl{cli: &clicmd.CLI{Name: "kubectl", Bin: "kubectl"}, set: settings{namespace: "evals", mst: "/mst", tar: "tar"}}
	full := &kubectl{cli: &clicmd.CLI{Name: "kubectl", Bin: "kubectl"}, set: settings{namespace: "evals", context: "kind-mst", kubeconfig: "/k/config", mst: "/mst", tar: "tar", env: "/bin/env"}}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"create", plain.createArgs(), []string{"--namespace", "evals", "create", "--filename", "-", "--output", "name"}},
		{"create with context", full.createArgs(), []string{"--kubeconfig", "/k/config", "--context", "kind-mst", "--namespace", "evals", "create", "--filename", "-", "--output", "name"}},
		{"wait", plain.waitArgs("mst-r-0", 90*time.Second), []string{"--namespace", "evals", "wait", "--for=condition=Ready", "pod/mst-r-0", "--timeout=1m30s", "--output", "json"}},
		{"can-i", full.canIArgs(Right{"watch", "pods"}), []string{"--kubeconfig", "/k/config", "--context", "kind-mst", "--namespace", "evals", "auth", "can-i", "watch", "pods"}},
		{"can-i a subresource", plain.canIArgs(Right{"create", "pods/exec"}), []string{"--namespace", "evals", "auth", "can-i", "create", "pods", "--subresource=exec"}},
		{"check tar", checkTarArgv(settings{tar: "/bin/tar", workDir: "/data/work"}), []string{"/bin/tar", "-c", "-f", "/dev/null", "-C", "/data/work", "."}},
		{"exec with stdin", plain.execArgs("mst-r-0", true, "/mst", "collect", "--bundle", "/work/bundle"),
			[]string{"--namespace", "evals", "exec", "--stdin", "mst-r-0", "--container", "worker", "--", "/mst", "collect", "--bundle", "/work/bundle"}},
		{"exec without stdin", full.execArgs("mst-r-0", false, "/mst", "version"),
			[]string{"--kubeconfig", "/k/config", "--context", "kind-mst", "--namespace", "evals", "exec", "mst-r-0", "--container", "worker", "--", "/mst", "version"}},
		{"delete", plain.deleteArgs("mst-r-0"), []string{"--namespace", "evals", "delete", "pod", "mst-r-0", "--wait=false", "--ignore-not-found"}},
		{"list a run", plain.listArgs("r 1"), []string{"--namespace", "evals", "get", "pods", "--selector", "mst.run=r-1", "--output", "json"}},
		{"list every run", plain.listArgs(""), []string{"--namespace", "evals", "get", "pods", "--selector", "mst.run", "--output", "json"}},
		{"command", commandArgv(plain.set, "m1", []string{"sh", "-c", "x"}), []string{"sh", "-c", "x"}},
		{"marked command", commandArgv(full.set, "m1", []string{"sh", "-c", "x"}), []string{"/bin/env", "MST_EXEC=m1", "sh", "-c", "x"}},
		{"command with variables", commandArgv(plain.set, "m1", []string{"sh"}, "MST_IMAGE_DIGEST=i@sha256:1"), []string{"sh"}},
		{"marked command with variables", commandArgv(full.set, "m1", []string{"sh"}, "MST_IMAGE_DIGEST=i@sha256:1"), []string{"/bin/env", "MST_EXEC=m1", "MST_IMAGE_DIGEST=i@sha256:1", "sh"}},
		{"untar", untarArgv(plain.set), []string{"tar", "-x", "-f", "-", "-C", "/"}},
		{"tar a file", tarArgv(plain.set, "/work/results/t/c.json"), []string{"tar", "-c", "-f", "-", "-C", "/work/results/t/", "c.json"}},
		{"tar a folder", tarArgv(plain.set, "/work/results/"), []string{"tar", "-c", "-f", "-", "-C", "/work/", "results"}},
		{"tar at the root", tarArgv(plain.set, "/work"), []string{"tar", "-c", "-f", "-", "-C", "/", "work"}},
		{"short args", shortArgs(full.execArgs("p", true, "a", "b", "c")), []string{"exec", "--stdin", "p", "…"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestParseLeftovers(t *testing.T) {
	out := `{"items":[
	  {"metadata":{"name":"mst-r2-1","labels":{"mst.run":"r2","mst.shard":"1"},"annotations":{"mst.run":"r2"},"creationTimestamp":"2026-11-30T07:00:00Z"},"status":{"phase":"Running"}},
	  {"metadata":{"name":"mst-r1-0","labels":{"mst.run":"r1","mst.shard":"0"},"creationTimestamp":"2026-11-30T06:00:00Z"},"status":{"phase":"Failed"}}
	]}`
	got, err := parseLeftovers([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []runner.Leftover{
		{ID: "mst-r1-0", Run: "r1", Shard: 0, Detail: "Failed, created 2026-11-30T06:00:00Z"},
		{ID: "mst-r2-1", Run: "r2", Shard: 1, Detail: "Running, created 2026-11-30T07:00:00Z"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseLeftovers (-want +got):\n%s", diff)
	}
	if _, err := parseLeftovers([]byte("not json")); err == nil {
		t.Error("parseLeftovers(not json) = nil error")
	}
}

func TestTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"bundle.json": "{}", "a/b.txt": "b", "a/c/d": "\x00\xff"}
	for name, body := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := runner.WriteTar(&buf, src, "work/bundle"); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := runner.ReadTar(&buf, dst); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dst, p)
			got[filepath.ToSlash(rel)] = string(b)
		}
		return err
	})
	if diff := cmp.Diff(files, got); diff != "" {
		t.Errorf("after writeTar and readTar (-want +got):\n%s", diff)
	}
	if err := runner.ReadTar(bytes.NewReader(nil), filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("readTar of an empty stream = nil error")
	}
}

// TestImageDigestEnv checks that a worker's pod tells it the image it
// runs, in the variable the worker reads, when the image's reference is
// pinned by digest (before the pod runs, nothing else says which image a
// tag is).
func TestImageDigestEnv(t *testing.T) {
	if imageDigestEnv != shard.ImageDigestEnv {
		t.Errorf("the pods set %s, and workers read %s", imageDigestEnv, shard.ImageDigestEnv)
	}
	has := func(env []envVar) string {
		for _, e := range env {
			if e.Name == imageDigestEnv {
				return e.Value
			}
		}
		return ""
	}
	if got := has(workerEnv("reg.example/mst-worker@sha256:0123")); got != "reg.example/mst-worker@sha256:0123" {
		t.Errorf("a pinned image's pod sets %s=%q, want the image", imageDigestEnv, got)
	}
	if got := has(workerEnv("reg.example/mst-worker:1.2.3")); got != "" {
		t.Errorf("a tagged image's pod sets %s=%q, want nothing before the cluster says the digest", imageDigestEnv, got)
	}
}

// TestClientSetupEnv checks that a worker's pod tells it how a client's
// program gets into the image in the variable the worker reads, with the
// setup command for the client and the push a cluster needs.
func TestClientSetupEnv(t *testing.T) {
	if clientSetupEnv != shard.ClientSetupEnv {
		t.Errorf("the pods set %s, and workers read %s", clientSetupEnv, shard.ClientSetupEnv)
	}
	hint := strings.ReplaceAll(clientSetup, "{client}", "codex-cli")
	for _, want := range []string{"`mst runner setup docker --with codex-cli`", "push it", "--runner-option image=REF"} {
		if !strings.Contains(hint, want) {
			t.Errorf("the hint for codex-cli is %q, want it to say %q", hint, want)
		}
	}
}

// TestDefaultImage checks that the pods run, by default, the Debian worker
// image, which has the tar the copies need, and that the help for an
// image without tar or mst names the setup command that builds it.
func TestDefaultImage(t *testing.T) {
	if got, want := DefaultImage("1.2.0"), "mst-worker:1.2.0-debian"; got != want {
		t.Errorf("DefaultImage(1.2.0) = %q, want %q", got, want)
	}
	if help := imageHelp("/mst", "1.2.0"); !strings.Contains(help, "`mst runner setup docker --with debian`") {
		t.Errorf("imageHelp = %q, want it to name the setup command of the Debian image", help)
	}
}
