package kubernetes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePlacement(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		options map[string]string
		want    placement
	}{
		{"none", map[string]string{}, placement{podSecurity: PodSecurityRestricted}},
		{"restricted, named", map[string]string{"podSecurity": "restricted"}, placement{podSecurity: PodSecurityRestricted}},
		{"uid", map[string]string{"runAsUser": "1000"}, placement{podSecurity: PodSecurityRestricted, hasUser: true, runAsUser: 1000, runAsGroup: 1000}},
		{"uid and gid", map[string]string{"runAsUser": "1000:0"}, placement{podSecurity: PodSecurityRestricted, hasUser: true, runAsUser: 1000, runAsGroup: 0}},
		{"baseline", map[string]string{"podSecurity": "baseline"}, placement{podSecurity: PodSecurityBaseline}},
		{"baseline as root", map[string]string{"podSecurity": "baseline", "runAsUser": "0"}, placement{podSecurity: PodSecurityBaseline, hasUser: true}},
		{"resources", map[string]string{"requests": "cpu=500m, memory=1Gi,", "limits": "cpu=2,memory=1.5G,ephemeral-storage=10Gi"}, placement{
			podSecurity: PodSecurityRestricted,
			requests:    map[string]string{"cpu": "500m", "memory": "1Gi"},
			limits:      map[string]string{"cpu": "2", "memory": "1.5G", "ephemeral-storage": "10Gi"},
		}},
		{"quantities", map[string]string{"requests": "cpu=.5,memory=1e9"}, placement{podSecurity: PodSecurityRestricted, requests: map[string]string{"cpu": ".5", "memory": "1e9"}}},
		{"node selector", map[string]string{"nodeSelector": "kubernetes.io/arch=amd64,pool=evals,empty="}, placement{
			podSecurity: PodSecurityRestricted, nodeSelector: map[string]string{"kubernetes.io/arch": "amd64", "pool": "evals", "empty": ""},
		}},
		{"tolerations", map[string]string{"tolerations": "dedicated=evals:NoSchedule,gpu:NoExecute,example.com/spot,k=v"}, placement{
			podSecurity: PodSecurityRestricted,
			tolerations: []toleration{
				{Key: "dedicated", Operator: "Equal", Value: "evals", Effect: "NoSchedule"},
				{Key: "gpu", Operator: "Exists", Effect: "NoExecute"},
				{Key: "example.com/spot", Operator: "Exists"},
				{Key: "k", Operator: "Equal", Value: "v"},
			},
		}},
		{"pull secrets", map[string]string{"imagePullSecrets": "regcred, mirror.cred,regcred"}, placement{podSecurity: PodSecurityRestricted, pullSecrets: []string{"regcred", "mirror.cred"}}},
		{"empty lists", map[string]string{"requests": ",", "nodeSelector": " ", "tolerations": ",,", "imagePullSecrets": ","}, placement{podSecurity: PodSecurityRestricted}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePlacement(tt.options)
			if err != nil {
				t.Fatalf("parsePlacement(%v) = %v", tt.options, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(placement{})); diff != "" {
				t.Errorf("parsePlacement(%v) (-want +got):\n%s", tt.options, diff)
			}
		})
	}
}

// TestPlacementRefusals checks that each kind of bad value is refused with
// an error that quotes the option and its value, says what is wrong, and
// shows a value that works.
func TestPlacementRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		option, value string
		// want are the parts the error must hold beyond the option=value
		// and the example.
		want    []string
		example string
	}{
		{"podSecurity", "privileged", []string{"restricted", "baseline"}, "baseline"},
		{"podSecurity", "Restricted", nil, "baseline"},
		{"runAsUser", "nobody", []string{`"nobody" is not a number`}, "1000:1000"},
		{"runAsUser", "-1", []string{"not a number"}, "1000:1000"},
		{"runAsUser", "1000:", []string{`the gid ""`}, "1000:1000"},
		{"runAsUser", "1000:staff", []string{`the gid "staff"`}, "1000:1000"},
		{"runAsUser", "4294967296", []string{"not a number"}, "1000:1000"},
		{"runAsUser", "0", []string{"other than root"}, "podSecurity=baseline"},
		{"runAsUser", "0:1000", []string{"other than root"}, "podSecurity=baseline"},
		{"requests", "cpu", []string{`"cpu" has no '='`}, "cpu=500m,memory=1Gi"},
		{"requests", "gpu=1", []string{`"gpu" is not a resource`, "cpu, memory, ephemeral-storage"}, "cpu=500m,memory=1Gi"},
		{"limits", "cpu=1,cpu=2", []string{"cpu is given twice"}, "cpu=500m,memory=1Gi"},
		{"limits", "memory=1 GiB", []string{`memory="1 GiB" is not a quantity`}, "cpu=500m,memory=1Gi"},
		{"limits", "cpu=-1", []string{"not a quantity"}, "cpu=500m,memory=1Gi"},
		{"limits", "cpu=", []string{"not a quantity"}, "cpu=500m,memory=1Gi"},
		{"requests", "memory=512m", []string{"thousandths of a byte", "512Mi"}, "cpu=500m,memory=1Gi"},
		{"requests", "ephemeral-storage=2m", []string{"2Mi"}, "cpu=500m,memory=1Gi"},
		{"nodeSelector", "pool", []string{`"pool" has no '='`}, "kubernetes.io/arch=amd64,pool=evals"},
		{"nodeSelector", "pool=a,pool=b", []string{"pool is given twice"}, "pool=evals"},
		{"nodeSelector", "bad key=x", []string{`the key "bad key"`}, "pool=evals"},
		{"nodeSelector", "Example.COM/k=x", []string{`prefix "Example.COM"`}, "pool=evals"},
		{"nodeSelector", "pool=-x", []string{`the value "-x"`}, "pool=evals"},
		{"nodeSelector", "pool=" + strings.Repeat("v", 64), []string{"is not a label value"}, "pool=evals"},
		{"tolerations", "gpu:NoSchedul", []string{`"NoSchedul" is not a taint's effect`, "NoSchedule, PreferNoSchedule, NoExecute"}, "dedicated=evals:NoSchedule"},
		{"tolerations", ":NoSchedule", []string{"names no key"}, "dedicated=evals:NoSchedule"},
		{"tolerations", "=v", []string{"names no key"}, "dedicated=evals:NoSchedule"},
		{"tolerations", "a b=c", []string{`the key "a b"`}, "dedicated=evals:NoSchedule"},
		{"tolerations", "k=v w", []string{`the value "v w"`}, "dedicated=evals:NoSchedule"},
		{"imagePullSecrets", "RegCred", []string{`"RegCred" is not a secret's name`}, "regcred,mirror-cred"},
		{"imagePullSecrets", "a/b", []string{`"a/b"`}, "regcred,mirror-cred"},
	} {
		t.Run(tt.option+"="+tt.value, func(t *testing.T) {
			options := map[string]string{tt.option: tt.value}
			if tt.option == "runAsUser" && strings.HasPrefix(tt.value, "0") {
				options["podSecurity"] = "restricted"
			}
			_, err := parsePlacement(options)
			if err == nil {
				t.Fatalf("parsePlacement(%v) = nil error, want a refusal", options)
			}
			for _, w := range append([]string{"--runner-option " + tt.option + "=" + tt.value, tt.example}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("parsePlacement(%v) = %v\nwant it to say %q", options, err, w)
				}
			}
		})
	}
}

func TestContainerDigest(t *testing.T) {
	t.Parallel()
	const sum = "sha256:4a1c4b21597c1b4415bdbecb28a3296c6b5e23ca4f9feeb599860a1dac6a0108"
	status := func(name, imageID string) string {
		return `{"kind":"Pod","status":{"phase":"Running","containerStatuses":[` +
			`{"name":"sidecar","image":"x","imageID":"docker.io/library/other@sha256:` + strings.Repeat("0", 64) + `"},` +
			`{"name":"` + name + `","image":"reg.example/w:2","imageID":"` + imageID + `"}]}}`
	}
	for _, tt := range []struct {
		name, out, wantDigest string
		wantImageID           string
	}{
		{"containerd, from a registry", status("worker", "reg.example/w@"+sum), sum, "reg.example/w@" + sum},
		{"docker-pullable", status("worker", "docker-pullable://reg.example/w@"+sum), sum, "docker-pullable://reg.example/w@" + sum},
		{"an image's own id", status("worker", sum), sum, sum},
		{"docker's own id", status("worker", "docker://"+sum), sum, "docker://" + sum},
		{"sha512", status("worker", "w@sha512:"+strings.Repeat("ab", 64)), "sha512:" + strings.Repeat("ab", 64), "w@sha512:" + strings.Repeat("ab", 64)},
		{"kwok: no imageID", status("worker", ""), "", ""},
		{"not a digest", status("worker", "reg.example/w:2"), "", "reg.example/w:2"},
		{"short digest", status("worker", "w@sha256:abc"), "", "w@sha256:abc"},
		{"no such container", status("other", "w@"+sum), "", ""},
		{"no status yet", `{"kind":"Pod","status":{}}`, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			digest, imageID, err := containerDigest([]byte(tt.out), ContainerName)
			if err != nil || digest != tt.wantDigest || imageID != tt.wantImageID {
				t.Errorf("containerDigest = %q, %q, %v; want %q, %q", digest, imageID, err, tt.wantDigest, tt.wantImageID)
			}
		})
	}
	if _, _, err := containerDigest([]byte("pod/x condition met"), ContainerName); err == nil {
		t.Error("containerDigest of what is not JSON = nil error")
	}
}

func TestPinImage(t *testing.T) {
	t.Parallel()
	const sum = "sha256:4a1c4b21597c1b4415bdbecb28a3296c6b5e23ca4f9feeb599860a1dac6a0108"
	withID := func(id string) string {
		return `{"status":{"containerStatuses":[{"name":"worker","imageID":"` + id + `"}]}}`
	}
	for _, tt := range []struct {
		name, ref, out, want string
		// said is a part of what is said when there is no digest, "" when
		// nothing is.
		said string
	}{
		{"tag", "reg.example/w:2", withID("reg.example/w@" + sum), "reg.example/w:2@" + sum, ""},
		{"no tag", "busybox", withID("docker.io/library/busybox@" + sum), "busybox@" + sum, ""},
		{"registry port", "localhost:5000/w:2", withID(sum), "localhost:5000/w:2@" + sum, ""},
		{"digest replaced", "w@sha256:" + strings.Repeat("1", 64), withID("w@" + sum), "w@" + sum, ""},
		{"kwok", "mst-worker:1.0", withID(""), "mst-worker:1.0", "no digest"},
		{"no digest in imageID", "w:2", withID("w:2"), "w:2", "holds no digest"},
		{"unreadable", "w:2", "not json", "w:2", "could not be read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var said []string
			got := pinImage(tt.out, tt.ref, func(msg string, _ ...any) { said = append(said, msg) })
			if got != tt.want {
				t.Errorf("pinImage(%s, %s) = %q, want %q", tt.out, tt.ref, got, tt.want)
			}
			switch {
			case tt.said == "" && len(said) != 0:
				t.Errorf("pinImage said %q, want nothing", said)
			case tt.said != "" && (len(said) != 1 || !strings.Contains(said[0], tt.said)):
				t.Errorf("pinImage said %q, want one message with %q", said, tt.said)
			}
		})
	}
}
