package ssh_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
	sshrunner "github.com/mst-eval/mst/runner/ssh"
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
