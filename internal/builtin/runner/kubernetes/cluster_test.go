package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/runner/kubernetes"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
)

// These tests need a cluster whose pods run their commands on this
// machine: the kwok cluster scripts/k8s starts, where every exec into a
// pod runs locally (kwok's ClusterExec). They run only with
// MST_KUBERNETES=1 and the cluster's kubeconfig in KUBECONFIG (what
// `scripts/k8s start` prints); otherwise they skip and say so.

// testVersion is the MST version of the mst these tests build.
const testVersion = "0.0.0-k8stest"

// testNamespace is the namespace scripts/k8s creates.
const testNamespace = "mst-test"

func TestMain(m *testing.M) {
	runnertest.Serve()
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

var built struct {
	once sync.Once
	err  error
	dir  string
	mst  string
}

// needCluster skips the test unless MST_KUBERNETES=1, and returns the mst
// it built for the pods to run (through kwok, on this machine).
func needCluster(t *testing.T) string {
	t.Helper()
	if os.Getenv("MST_KUBERNETES") != "1" {
		msg := "no Kubernetes cluster to test with: run scripts/k8s start, export the KUBECONFIG it prints, and set MST_KUBERNETES=1 (scripts/test does all this)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "mst-k8s-test-"); built.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", built.dir+string(filepath.Separator),
			"-ldflags=-X github.com/mst-eval/mst/internal/cli.Version="+testVersion, "github.com/mst-eval/mst/cmd/mst")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building mst: %v\n%s", err, out)
			return
		}
		built.mst = filepath.Join(built.dir, "mst")
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.mst
}

// options are the runner options for the kwok cluster. Every pod's
// commands run on this machine, so each runner gets a work folder of its
// own.
func options(t *testing.T, mst string) map[string]string {
	env, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		kubernetes.OptionNamespace: testNamespace,
		kubernetes.OptionImage:     "mst-worker:" + testVersion,
		kubernetes.OptionMST:       mst,
		kubernetes.OptionWorkDir:   t.TempDir(),
		kubernetes.OptionEnv:       env,
		// A generous bound: on a loaded 2-core machine the local
		// cluster has taken over a minute to make a pod Ready.
		kubernetes.OptionPodTimeout: "5m",
	}
}

func TestMachine(t *testing.T) {
	mst := needCluster(t)
	runnertest.RunMachine(t, func(t *testing.T) runner.Machine {
		r, err := kubernetes.New(t.Context(), runner.Params{Options: options(t, mst), MSTVersion: testVersion})
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		run := "machine-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
		m, err := kubernetes.CreatePod(t.Context(), r, run, 0)
		if err != nil {
			t.Fatalf("creating a pod: %v", err)
		}
		return m
	})
}

func TestConformance(t *testing.T) {
	mst := needCluster(t)
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p runner.Params) (runner.Runner, error) {
			p.MST = []string{mst}
			p.Options = options(t, mst)
			return kubernetes.New(t.Context(), p)
		},
		MSTVersion: testVersion,
		// Every pod's commands share this machine, and a runner's work
		// folder is one for all its pods, so each runner runs one shard.
		Shards: 1,
	})
}

func TestLeftovers(t *testing.T) {
	mst := needCluster(t)
	opts := options(t, mst)
	r, err := kubernetes.New(t.Context(), runner.Params{Options: opts, MSTVersion: testVersion})
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	if _, err := kubernetes.CreatePod(t.Context(), r, "leftover-run", 4); err != nil {
		t.Fatalf("creating a pod: %v", err)
	}
	ctx := context.WithoutCancel(t.Context())
	found, err := kubernetes.Leftovers(ctx, opts, "leftover-run")
	if err != nil || len(found) != 1 || found[0].Run != "leftover-run" || found[0].Shard != 4 {
		t.Fatalf("Leftovers = %+v, %v; want the one pod of leftover-run, shard 4", found, err)
	}
	if err := kubernetes.Remove(ctx, opts, found[0]); err != nil {
		t.Errorf("Remove = %v", err)
	}
	if err := kubernetes.Remove(ctx, opts, found[0]); err != nil {
		t.Errorf("Remove a second time = %v, want nil", err)
	}
}
