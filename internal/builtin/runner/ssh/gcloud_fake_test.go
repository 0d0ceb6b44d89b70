package ssh_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sshrunner "github.com/mst-eval/mst/internal/builtin/runner/ssh"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
)

// fakeGcloud is a stand-in for the gcloud CLI: a VM is a folder under
// root, `compute ssh` runs the command there in sh with HOME set to the
// VM's home, and `compute scp` copies with cp -R. Every call is logged to
// root/calls. It runs the gcloud runner's whole flow (create, boot wait,
// install, exec, copies, delete) here; gcloud itself is not tried.
const fakeGcloud = `#!/bin/sh
root=ROOT
printf '%s\n' "$*" >> "$root/calls"
name=$4
case "$1 $2 $3" in
"compute instances create")
	mkdir -p "$root/vms/$name/home" && exit 0 ;;
"compute instances delete")
	rm -rf "$root/vms/$name" && exit 0 ;;
"compute instances list")
	echo '[]' && exit 0 ;;
esac
case "$1 $2" in
"compute ssh")
	vm=$3
	for a; do case "$a" in --command=*) cmd=${a#--command=} ;; esac; done
	[ -d "$root/vms/$vm" ] || { echo "no VM $vm" >&2; exit 255; }
	cd "$root/vms/$vm/home" && HOME="$root/vms/$vm/home" exec sh -c "$cmd" ;;
"compute scp")
	for a; do src=$dst; dst=$a; done
	src=${src#mst-*:}
	dst=${dst#mst-*:}
	exec cp -R "$src" "$dst" ;;
esac
echo "fake gcloud: unknown command $*" >&2
exit 2
`

// newFakeGcloud writes the fake gcloud and returns its path and root.
func newFakeGcloud(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	bin := filepath.Join(root, "gcloud")
	if err := os.WriteFile(bin, []byte(strings.ReplaceAll(fakeGcloud, "ROOT", root)), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, root
}

func gcloudOptions(bin string) map[string]string {
	return map[string]string{"project": "acme-evals", "zone": "europe-west4-a", "gcloud": bin}
}

func TestGcloudConformance(t *testing.T) {
	t.Parallel()
	bin, root := newFakeGcloud(t)
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p runner.Params) (runner.Runner, error) {
			p.MST = []string{mstBinary(t)}
			for k, v := range gcloudOptions(bin) {
				p.Options[k] = v
			}
			return sshrunner.GcloudDefinition().New(t.Context(), p)
		},
		MSTVersion: testVersion,
		Shards:     2,
	})
	t.Cleanup(func() {
		// Every VM the suite made is deleted, and every ssh and scp went
		// through IAP.
		if vms, _ := os.ReadDir(filepath.Join(root, "vms")); len(vms) > 0 {
			t.Errorf("VMs left after the suite: %d", len(vms))
		}
		calls, _ := os.ReadFile(filepath.Join(root, "calls"))
		for _, c := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
			if (strings.HasPrefix(c, "compute ssh") || strings.HasPrefix(c, "compute scp")) && !strings.Contains(c, "--tunnel-through-iap") {
				t.Errorf("a gcloud call without --tunnel-through-iap: %s", c)
			}
		}
	})
}

func TestGcloudMachine(t *testing.T) {
	t.Parallel()
	bin, _ := newFakeGcloud(t)
	var mu sync.Mutex
	n := 0
	runnertest.RunMachine(t, func(t *testing.T) runner.Machine {
		r, err := sshrunner.GcloudDefinition().New(t.Context(), runner.Params{Options: gcloudOptions(bin), MST: []string{mstBinary(t)}})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		m, err := sshrunner.CreateGcloudMachine(t.Context(), r, "machine-test", i)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// TestGcloudCreateFails checks that a VM which cannot be made ready is
// deleted again.
func TestGcloudCreateFails(t *testing.T) {
	t.Parallel()
	bin, root := newFakeGcloud(t)
	o := gcloudOptions(bin)
	o["mst"] = "/nowhere/mst"
	r, err := sshrunner.GcloudDefinition().New(t.Context(), runner.Params{Options: o, MST: []string{mstBinary(t)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sshrunner.CreateGcloudMachine(context.WithoutCancel(t.Context()), r, "broken", 0)
	if err == nil || !strings.Contains(err.Error(), "/nowhere/mst version") {
		t.Errorf("creating a VM without mst = %v, want the mst check's error", err)
	}
	calls, _ := os.ReadFile(filepath.Join(root, "calls"))
	if !strings.Contains(string(calls), "compute instances delete mst-broken-s0") {
		t.Errorf("the VM was not deleted after it failed to get ready; calls:\n%s", calls)
	}
}

// TestGcloudCoordinator makes a detached run's coordinator VM with the
// fake gcloud: it is created like a worker's VM, with the service
// account, the deadline Compute Engine deletes it at and the detached
// run's label; mst runs on it; Finish, run on the VM, deletes it, and so
// does Dispose from here, once.
func TestGcloudCoordinator(t *testing.T) {
	t.Parallel()
	bin, root := newFakeGcloud(t)
	const sa = "mst-coordinator@acme-evals.iam.gserviceaccount.com"
	params := func(id string, deadline time.Duration, extra ...string) runner.CoordinatorParams {
		o := gcloudOptions(bin)
		o["coordinatorServiceAccount"] = sa
		for i := 0; i+1 < len(extra); i += 2 {
			o[extra[i]] = extra[i+1]
		}
		return runner.CoordinatorParams{Options: o, ID: id, Deadline: deadline, MST: []string{mstBinary(t)}}
	}
	calls := func() string {
		b, _ := os.ReadFile(filepath.Join(root, "calls"))
		return string(b)
	}
	create := sshrunner.GcloudDefinition().Coordinator

	// Refused before any VM: no service account, a deadline Compute
	// Engine does not take.
	noSA := params("no-sa", time.Hour)
	delete(noSA.Options, "coordinatorServiceAccount")
	if _, err := create(t.Context(), noSA); err == nil || !strings.Contains(err.Error(), "--runner-option coordinatorServiceAccount=") {
		t.Errorf("Coordinator without a service account = %v, want it to ask for coordinatorServiceAccount", err)
	}
	for _, d := range []time.Duration{10 * time.Second, 200 * 24 * time.Hour} {
		if _, err := create(t.Context(), params("bad-deadline", d)); err == nil || !strings.Contains(err.Error(), "30s to 120 days") {
			t.Errorf("Coordinator with a deadline of %s = %v, want it refused with the range", d, err)
		}
	}
	if c := calls(); strings.Contains(c, "instances create") {
		t.Fatalf("a refused coordinator made a VM; calls:\n%s", c)
	}

	c, err := create(t.Context(), params("Detached_One", 2*time.Hour+time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const name = "mst-coordinator-detached-one"
	want := "compute instances create " + name + " --project=acme-evals --zone=europe-west4-a --machine-type=e2-standard-4 --image-family=debian-12 --image-project=debian-cloud" +
		" --service-account=" + sa + " --scopes=cloud-platform --max-run-duration=7201s --instance-termination-action=DELETE --labels=mst-detached=detached_one --quiet\n"
	if !strings.Contains(calls(), want) {
		t.Errorf("the coordinator VM was not created as\n%s\ncalls:\n%s", want, calls())
	}
	vm := filepath.Join(root, "vms", name)
	if c.ID() != "projects/acme-evals/zones/europe-west4-a/instances/"+name {
		t.Errorf("ID() = %s", c.ID())
	}
	if want := filepath.Join(vm, "home", ".cache", "mst", "work", "coordinator-Detached_One"); c.WorkDir() != want || !exists(want) {
		t.Errorf("WorkDir() = %s, want %s, there", c.WorkDir(), want)
	}
	if id := c.Identity(); !strings.Contains(id, sa) || !strings.Contains(id, name) {
		t.Errorf("Identity() = %q, want the service account and the VM", id)
	}
	if env := c.Env(); len(env) != 0 {
		t.Errorf("Env() = %q, want none", env)
	}
	var out bytes.Buffer
	if err := c.Exec(t.Context(), append(c.MST(), "version"), nil, &out, &out); err != nil || strings.TrimSpace(out.String()) != "mst "+testVersion {
		t.Fatalf("mst version on the coordinator VM = %q, %v", out.String(), err)
	}
	// The coordinator runs Finish on the VM: gcloud there deletes it.
	if got := c.Finish(); len(got) == 0 || got[0] != bin || strings.Join(got[1:], " ") != "compute instances delete "+name+" --project=acme-evals --zone=europe-west4-a --quiet" {
		t.Errorf("Finish() = %q, want gcloud deleting %s", got, name)
	}
	out.Reset()
	if err := c.Exec(t.Context(), c.Finish(), nil, &out, &out); err != nil {
		t.Fatalf("Finish on the VM = %v: %s", err, out.String())
	}
	if exists(vm) {
		t.Error("the coordinator VM is still there after Finish")
	}

	// Dispose deletes a VM the coordinator could not be started on, once.
	d, err := create(t.Context(), params("disposed", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := d.Dispose(t.Context()); err != nil {
			t.Fatalf("Dispose = %v", err)
		}
	}
	if exists(filepath.Join(root, "vms", "mst-coordinator-disposed")) {
		t.Error("the coordinator VM is still there after Dispose")
	}
	if n := strings.Count(calls(), "compute instances delete mst-coordinator-disposed "); n != 1 {
		t.Errorf("Dispose twice deleted the VM %d times, want once", n)
	}

	// A VM that cannot be made ready is deleted again.
	if _, err := create(context.WithoutCancel(t.Context()), params("broken", time.Hour, "mst", "/nowhere/mst")); err == nil || !strings.Contains(err.Error(), "/nowhere/mst version") {
		t.Errorf("a coordinator VM without mst = %v, want the mst check's error", err)
	}
	if !strings.Contains(calls(), "compute instances delete mst-coordinator-broken ") || exists(filepath.Join(root, "vms", "mst-coordinator-broken")) {
		t.Errorf("the coordinator VM that did not get ready was not deleted; calls:\n%s", calls())
	}
}
