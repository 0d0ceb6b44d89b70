package ssh

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/runner"
)

func testGcloudOptions(t *testing.T, extra map[string]string) gcloudOptions {
	t.Helper()
	m := map[string]string{"project": "acme-evals", "zone": "europe-west4-a"}
	for k, v := range extra {
		m[k] = v
	}
	o, err := parseGcloudOptions(m)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestGcloudArgs pins every gcloud command the runner runs, argument by
// argument: nothing here runs gcloud.
func TestGcloudArgs(t *testing.T) {
	t.Parallel()
	def := testGcloudOptions(t, nil)
	custom := testGcloudOptions(t, map[string]string{
		"machineType": "n2-standard-8", "image": "mst-worker-7", "imageProject": "acme-images",
		"network": "evals", "subnet": "evals-eu", "noAddress": "true", "strictHostKeyChecking": "true",
	})
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{
			name: "create with defaults",
			got:  createArgs(def, "mst-quickstart-s0", "quickstart-20261201-070000-abcdef", 0, 72*time.Hour),
			want: []string{"compute", "instances", "create", "mst-quickstart-s0", "--project=acme-evals", "--zone=europe-west4-a",
				"--machine-type=e2-standard-4", "--image-family=debian-12", "--image-project=debian-cloud",
				"--max-run-duration=259200s", "--instance-termination-action=DELETE", "--labels=mst-run=quickstart-20261201-070000-abcdef,mst-shard=0", "--quiet"},
		},
		{
			name: "create with every option, a deadline shorter than Compute Engine takes",
			got:  createArgs(custom, "mst-r-s3", "R", 3, 10*time.Second),
			want: []string{"compute", "instances", "create", "mst-r-s3", "--project=acme-evals", "--zone=europe-west4-a",
				"--machine-type=n2-standard-8", "--image=mst-worker-7", "--image-project=acme-images",
				"--network=evals", "--subnet=evals-eu", "--no-address", "--max-run-duration=30s", "--instance-termination-action=DELETE", "--labels=mst-run=r,mst-shard=3", "--quiet"},
		},
		{
			name: "create a coordinator VM",
			got:  coordinatorCreateArgs(withSA(def), "mst-coordinator-d1", "D1", 24*time.Hour),
			want: []string{"compute", "instances", "create", "mst-coordinator-d1", "--project=acme-evals", "--zone=europe-west4-a",
				"--machine-type=e2-standard-4", "--image-family=debian-12", "--image-project=debian-cloud",
				"--service-account=coord@acme-evals.iam.gserviceaccount.com", "--scopes=cloud-platform",
				"--max-run-duration=86400s", "--instance-termination-action=DELETE", "--labels=mst-detached=d1", "--quiet"},
		},
		{
			name: "create a coordinator VM with every option, a deadline in part seconds",
			got:  coordinatorCreateArgs(withSA(custom), "mst-coordinator-d2", "d2", 90*time.Minute+1500*time.Millisecond),
			want: []string{"compute", "instances", "create", "mst-coordinator-d2", "--project=acme-evals", "--zone=europe-west4-a",
				"--machine-type=n2-standard-8", "--image=mst-worker-7", "--image-project=acme-images",
				"--network=evals", "--subnet=evals-eu", "--no-address",
				"--service-account=coord@acme-evals.iam.gserviceaccount.com", "--scopes=cloud-platform",
				"--max-run-duration=5402s", "--instance-termination-action=DELETE", "--labels=mst-detached=d2", "--quiet"},
		},
		{
			name: "ssh",
			got:  sshArgs(def, "mst-r-s0", "cd /home/me/w && exec mst collect"),
			want: []string{"compute", "ssh", "mst-r-s0", "--project=acme-evals", "--zone=europe-west4-a", "--tunnel-through-iap", "--quiet",
				"--command=cd /home/me/w && exec mst collect"},
		},
		{
			name: "ssh, strict",
			got:  sshArgs(custom, "mst-r-s0", "true"),
			want: []string{"compute", "ssh", "mst-r-s0", "--project=acme-evals", "--zone=europe-west4-a", "--tunnel-through-iap", "--quiet",
				"--strict-host-key-checking=yes", "--command=true"},
		},
		{
			name: "scp to the VM",
			got:  scpArgs(def, "/tmp/mst-bundle-1", "mst-r-s0:/home/me/w/bundle"),
			want: []string{"compute", "scp", "--project=acme-evals", "--zone=europe-west4-a", "--tunnel-through-iap", "--quiet", "--recurse",
				"/tmp/mst-bundle-1", "mst-r-s0:/home/me/w/bundle"},
		},
		{
			name: "scp from the VM, strict",
			got:  scpArgs(custom, "mst-r-s0:/home/me/w/results/t.json", "/runs/r/.tmp-copy-1/"),
			want: []string{"compute", "scp", "--project=acme-evals", "--zone=europe-west4-a", "--tunnel-through-iap", "--quiet", "--recurse",
				"--strict-host-key-checking=yes", "mst-r-s0:/home/me/w/results/t.json", "/runs/r/.tmp-copy-1/"},
		},
		{
			name: "delete",
			got:  deleteArgs(def, "mst-r-s0"),
			want: []string{"compute", "instances", "delete", "mst-r-s0", "--project=acme-evals", "--zone=europe-west4-a", "--quiet"},
		},
		{
			name: "list one run",
			got:  listArgs(def, "Quick/Start"),
			want: []string{"compute", "instances", "list", "--project=acme-evals", "--filter=labels.mst-run=quick_start",
				"--format=json(name,zone,status,creationTimestamp,labels)"},
		},
		{
			name: "list every run",
			got:  listArgs(def, ""),
			want: []string{"compute", "instances", "list", "--project=acme-evals", "--filter=labels.mst-run:*",
				"--format=json(name,zone,status,creationTimestamp,labels)"},
		},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s: argv (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestInstanceName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		run            string
		shard, attempt int
		want           string
	}{
		{"quickstart-20261201-070000-abcdef", 0, 1, "mst-quickstart-20261201-070000-abcdef-s0"},
		{"quickstart-20261201-070000-abcdef", 12, 2, "mst-quickstart-20261201-070000-abcdef-s12-a2"},
		{"My_Eval.v2-20261201-070000-abcdef", 1, 1, "mst-my-eval-v2-20261201-070000-abcdef-s1"},
	}
	for _, tt := range tests {
		if got := instanceName(tt.run, tt.shard, tt.attempt, false); got != tt.want {
			t.Errorf("instanceName(%q, %d, %d) = %s, want %s", tt.run, tt.shard, tt.attempt, got, tt.want)
		}
	}
	long1 := instanceName(strings.Repeat("a-very-long-eval-name-", 4)+"20261201-070000-abcdef", 63, 9, false)
	long2 := instanceName(strings.Repeat("a-very-long-eval-name-", 4)+"20261201-070000-abcdeg", 63, 9, false)
	for _, n := range []string{long1, long2} {
		if len(n) > 63 || !nameOK.MatchString(n) {
			t.Errorf("instanceName of a long run id = %s (%d long), want a valid name of at most 63", n, len(n))
		}
	}
	if long1 == long2 {
		t.Errorf("two long run ids that differ at the end got the same name %s", long1)
	}
}

func withSA(o gcloudOptions) gcloudOptions {
	o.CoordinatorSA = "coord@acme-evals.iam.gserviceaccount.com"
	return o
}

// TestCoordinatorName checks the coordinator VM's name for ids of every
// shape: valid, at most 63 long, and apart for ids that differ only where
// a long one is cut.
func TestCoordinatorName(t *testing.T) {
	t.Parallel()
	if got := coordinatorName("quickstart-20261201-070000-abcdef"); got != "mst-coordinator-quickstart-20261201-070000-abcdef" {
		t.Errorf("coordinatorName of a plain id = %s", got)
	}
	if got := coordinatorName("My_Eval.v2/Run"); got != "mst-coordinator-my-eval-v2-run" {
		t.Errorf("coordinatorName of an id with other characters = %s", got)
	}
	long := strings.Repeat("a-very-long-eval-name-", 4)
	names := map[string]bool{}
	for _, id := range []string{"", "___", "ÄÖÜ", long + "1", long + "2", strings.Repeat("x", 200) + "-"} {
		n := coordinatorName(id)
		if len(n) > 63 || !nameOK.MatchString(n) || !strings.HasPrefix(n, "mst-coordinator-") {
			t.Errorf("coordinatorName(%q) = %s (%d long), want a valid name of at most 63 starting mst-coordinator-", id, n, len(n))
		}
		names[n] = true
	}
	if !names[coordinatorName(long+"1")] || coordinatorName(long+"1") == coordinatorName(long+"2") {
		t.Errorf("two long ids that differ at the end got the same name %s", coordinatorName(long+"1"))
	}
}

var nameOK = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func TestGcloudOptionsNeedProjectAndZone(t *testing.T) {
	t.Parallel()
	for _, m := range []map[string]string{{}, {"project": "p"}, {"zone": "z"}} {
		if _, err := parseGcloudOptions(m); err == nil || !strings.Contains(err.Error(), "project=PROJECT") {
			t.Errorf("parseGcloudOptions(%v) = %v, want it to ask for project and zone", m, err)
		}
	}
}

func TestParseInstances(t *testing.T) {
	t.Parallel()
	o := testGcloudOptions(t, nil)
	list := `[{"name":"mst-r-s1","zone":"https://www.googleapis.com/compute/v1/projects/acme-evals/zones/europe-west4-b","status":"RUNNING","creationTimestamp":"2026-12-01T07:00:00.000-08:00","labels":{"mst-run":"r","mst-shard":"1"}}]`
	got, err := parseInstances(o, list)
	if err != nil {
		t.Fatal(err)
	}
	want := []runner.Leftover{{ID: "projects/acme-evals/zones/europe-west4-b/instances/mst-r-s1", Run: "r", Shard: 1, Detail: "running since 2026-12-01T07:00:00.000-08:00"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseInstances (-want +got):\n%s", diff)
	}
}
