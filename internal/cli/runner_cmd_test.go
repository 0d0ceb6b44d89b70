package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/mst-eval/mst/internal/cli"
)

// mstRun runs mst in-process and returns its exit code, stdout and stderr.
func mstRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), args, cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ()})
	return code, stdout.String(), stderr.String()
}

func TestRunnerList(t *testing.T) {
	t.Parallel()
	code, out, errOut := mstRun(t, "runner", "list", "--json")
	if code != 0 {
		t.Fatalf("mst runner list --json exited %d: %s", code, errOut)
	}
	var doc struct {
		Kind    string `json:"kind"`
		Runners []struct {
			Name      string `json:"name"`
			MaxShards int    `json:"maxShards"`
			Setup     bool   `json:"setup"`
			Cleanup   bool   `json:"cleanup"`
			Options   struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"options"`
		} `json:"runners"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Kind != "mst.runners" {
		t.Fatalf("mst runner list --json is not an mst.runners object (%v):\n%s", err, out)
	}
	list := doc.Runners
	found := false
	for _, r := range list {
		if r.Name != "docker" {
			continue
		}
		found = true
		if diff := cmp.Diff([]string{"cloudFiles", "desktopApp", "desktopPackage", "exclusive", "image", "mounts", "mst", "network", "view", "workdir"}, slices.Sorted(maps.Keys(r.Options.Properties))); diff != "" {
			t.Errorf("docker's options (-want +got):\n%s", diff)
		}
		if !r.Setup || !r.Cleanup || r.MaxShards < 2 {
			t.Errorf("docker: setup %v, cleanup %v, maxShards %d; want setup, cleanup and several shards", r.Setup, r.Cleanup, r.MaxShards)
		}
	}
	if !found {
		t.Errorf("mst runner list --json has no docker runner:\n%s", out)
	}

	code, out, _ = mstRun(t, "runner", "list")
	if code != 0 || !strings.Contains(out, "mst runner setup docker") || !strings.Contains(out, "image (string; default mst-worker:<mst version>)") {
		t.Errorf("mst runner list = %d\n%s\nwant docker's setup command and its image option", code, out)
	}
}

func TestRunnerSetupAndCleanupUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"runner", "setup", "local"}, 0, "the local runner needs no setup", ""},
		{[]string{"runner", "setup", "dokcer"}, int(cli.ExitUsage), "", `unknown runner "dokcer" (known: `},
		{[]string{"runner", "setup", "docker", "--runner-option", "imagee=x"}, int(cli.ExitUsage), "", "imagee"},
		{[]string{"runner", "cleanup", "--runner-option", "image=x"}, int(cli.ExitUsage), "", "--runner-option needs --runner NAME"},
		{[]string{"runner", "cleanup", "some-run", "--runner", "nope"}, int(cli.ExitUsage), "", "unknown runner"},
		{[]string{"runner", "cleanup", "some-run", "--runner", "processes"}, 0, "run some-run left no machine behind", ""},
	} {
		code, out, errOut := mstRun(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
			t.Errorf("mst %s = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q",
				strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out, tc.err)
		}
	}
}

// dockerTestVersion is the version of the static mst the docker tests
// build; its worker image is mst-worker:0.0.0-clitest, apart from every
// other package's.
const dockerTestVersion = "0.0.0-clitest"

// dockerTools checks that a Docker daemon answers (failing under CI,
// skipping elsewhere), builds static mst, weather and mcp-testserver into
// a folder of t's, runs `mst runner setup docker` with that mst, and
// returns the folder. Each call builds again (from Go's and Docker's
// caches): the folder goes when t ends, so a later run of the test
// (-count) cannot share it.
func dockerTools(t testing.TB) string {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Os}}").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("no Docker to test with (start one with scripts/dockerd start and export the DOCKER_HOST it prints): %v: %s", err, out)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"-ldflags=-X github.com/mst-eval/mst/internal/cli.Version="+dockerTestVersion,
		"github.com/mst-eval/mst/cmd/mst", "github.com/mst-eval/mst/examples/quickstart/weather",
		"github.com/mst-eval/mst/internal/testkit/testserver/cmd/mcp-testserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building static mst, weather and mcp-testserver: %v\n%s", err, out)
	}
	setup := exec.Command(filepath.Join(dir, "mst"), "runner", "setup", "docker")
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("mst runner setup docker: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "built mst-worker:"+dockerTestVersion) {
		t.Fatalf("mst runner setup docker printed %q, want it to name mst-worker:%s", out, dockerTestVersion)
	}
	return dir
}

// TestDocker runs what needs a Docker daemon, sharing one build of the
// static binaries and one worker image.
func TestDocker(t *testing.T) {
	t.Parallel()
	tools := dockerTools(t)
	t.Run("Quickstart", func(t *testing.T) {
		t.Parallel()
		testDockerQuickstart(t, tools)
	})
	t.Run("Interrupt", func(t *testing.T) {
		t.Parallel()
		testDockerInterrupt(t, tools)
	})
	t.Run("Connector", func(t *testing.T) {
		t.Parallel()
		testDockerConnector(t, tools)
	})
	t.Run("GradeKeys", func(t *testing.T) {
		t.Parallel()
		testDockerGradeKeys(t, tools)
	})
	t.Run("Scripts", func(t *testing.T) {
		t.Parallel()
		testscript.Run(t, testscript.Params{
			Dir: filepath.Join("testdata", "script", "docker"),
			Setup: func(env *testscript.Env) error {
				// The static mst comes first on PATH: the containers run
				// it, and the coordinator must be the same version.
				env.Setenv("PATH", tools+string(os.PathListSeparator)+env.Getenv("PATH"))
				env.Setenv("MCP_TESTSERVER", filepath.Join(tools, "mcp-testserver"))
				env.Setenv("WEATHER", filepath.Join(tools, "weather"))
				qs, err := filepath.Abs(filepath.Join("..", "..", "examples", "quickstart"))
				if err != nil {
					return err
				}
				env.Setenv("QUICKSTART", qs)
				env.Setenv("DOCKER_HOST", os.Getenv("DOCKER_HOST"))
				env.Setenv("DOCKER_CONFIG", filepath.Join(env.WorkDir, ".docker"))
				env.Setenv("NO_COLOR", "1")
				return nil
			},
			Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
				"waitfiles":   waitFiles,
				"gcsemulator": gcsEmulator,
				"s3emulator":  s3Emulator,
			},
		})
	})
}

// gcsEmulator starts a GCS emulator (fake-gcs-server) in the test's
// process for the rest of the script, makes the buckets its arguments
// name, and points the script's commands at it (STORAGE_EMULATOR_HOST).
func gcsEmulator(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: gcsemulator BUCKET...")
	}
	g, err := blobtest.NewGCS()
	if err != nil {
		ts.Fatalf("%v", err)
	}
	ts.Defer(g.Close)
	for _, b := range args {
		g.CreateBucket(b)
	}
	ts.Setenv("STORAGE_EMULATOR_HOST", g.Host())
}

// s3Emulator starts an S3 emulator (gofakes3) in the test's process for
// the rest of the script, makes the buckets its arguments name, points
// the AWS default chain of the script's commands at a dummy profile in
// files, and sets S3_ENDPOINT to the emulator's URL.
func s3Emulator(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: s3emulator BUCKET...")
	}
	s, err := blobtest.NewS3()
	if err != nil {
		ts.Fatalf("%v", err)
	}
	ts.Defer(s.Close)
	for _, b := range args {
		if err := s.CreateBucket(b); err != nil {
			ts.Fatalf("%v", err)
		}
	}
	env, err := blobtest.ProfileEnv(ts.MkAbs("."))
	if err != nil {
		ts.Fatalf("%v", err)
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		ts.Setenv(k, v)
	}
	ts.Setenv("S3_ENDPOINT", s.URL())
}

// testDockerQuickstart runs the quickstart locally and with the docker
// runner on two shards, with the static mst and weather server, and
// checks that both give every variant the same pass rate over the same
// number of graded trials.
func testDockerQuickstart(t *testing.T, tools string) {
	dir := t.TempDir()
	// The eval names ../../bin/weather relative to itself: rebuild that
	// layout, with the static weather server, which runs in the container.
	qs := filepath.Join(dir, "examples", "quickstart")
	os.MkdirAll(qs, 0o755)
	for _, f := range []string{"eval.yaml", "cases.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(qs, f), b, 0o644)
	}
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	weather, err := os.ReadFile(filepath.Join(tools, "weather"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bin", "weather"), weather, 0o755)

	type variant struct {
		PassRate *float64 `json:"passRate"`
		Graded   int      `json:"graded"`
	}
	report := func(args ...string) map[string]variant {
		t.Helper()
		cmd := exec.Command(filepath.Join(tools, "mst"), append([]string{"run", filepath.Join(qs, "eval.yaml"), "--json"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("mst run %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		var rep struct {
			Variants []struct {
				Variant string `json:"variant"`
				variant
			} `json:"variants"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("report of mst run %s: %v\n%s", strings.Join(args, " "), err, stdout.String())
		}
		out := map[string]variant{}
		for _, v := range rep.Variants {
			out[v.Variant] = v.variant
		}
		return out
	}
	local := report("--results", filepath.Join(dir, "local"))
	inDocker := report("--results", filepath.Join(dir, "docker"), "--runner", "docker", "--runner-option", "shards=2")
	if diff := cmp.Diff(local, inDocker); diff != "" {
		t.Errorf("pass rates, local vs docker with 2 shards (-local +docker):\n%s", diff)
	}
	if len(local) != 2 || local["clear"].Graded != 42 {
		t.Errorf("local report = %+v, want 2 variants with 42 graded trials each", local)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "docker", "*", "runs", "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("docker runs = %v, want one", runs)
	}
	raw, _ := os.ReadFile(runs[0])
	var rec struct {
		ID     string `json:"id"`
		Runner struct {
			Machines []struct {
				ID    string `json:"id"`
				Image string `json:"image"`
			} `json:"machines"`
		} `json:"runner"`
	}
	json.Unmarshal(raw, &rec)
	if len(rec.Runner.Machines) != 2 {
		t.Fatalf("run.json machines = %+v, want two", rec.Runner.Machines)
	}
	for _, m := range rec.Runner.Machines {
		if !strings.HasPrefix(m.Image, "mst-worker:"+dockerTestVersion+"@sha256:") {
			t.Errorf("machine %s: image %q, want mst-worker:%s@sha256:…", m.ID, m.Image, dockerTestVersion)
		}
	}
	if out, err := exec.Command("docker", "ps", "--all", "--quiet", "--filter", "label=mst.run="+rec.ID).Output(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("containers of run %s after it ended: %q (%v), want none", rec.ID, out, err)
	}
}
