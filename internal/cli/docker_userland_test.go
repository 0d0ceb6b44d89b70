package cli_test

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/docker"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestDockerUserland builds a worker image with a userland the way a user
// does, `mst runner setup docker --with claude-code,codex-cli,gemini-cli,everything`
// (its Dockerfile FROM debian:bookworm-slim, which this test makes from
// Debian's packages with mmdebstrap when the Docker host lacks it), and
// runs an eval in it: the npm server-everything and a variant on each of
// the Claude Code, Codex and Gemini CLIs, installed in the image and
// talking to the fake provider on this machine, in two docker shards.
func TestDockerUserland(t *testing.T) {
	t.Parallel()
	tools := dockerTools(t)
	start := time.Now()
	debianBase(t)
	t.Logf("the base image %s: %s", docker.DebianBase, time.Since(start).Round(time.Second))
	if _, err := exec.LookPath("npm"); err != nil {
		need(t, "npm, which installs the image's npm packages (Debian: apt-get install npm)")
	}
	mst := toolsMST(tools)

	// Names setup does not know are refused before anything is built,
	// with the names it knows.
	for _, with := range []string{"claude", "node,ruby", "everything,server-everything", "Claude Code"} {
		out, err := mst("runner", "setup", "docker", "--with", with)
		if err == nil || !strings.Contains(out, "not a part of a worker image MST knows") || !strings.Contains(out, "python, node, claude-code, codex-cli, gemini-cli, everything") ||
			strings.Contains(out, "building") {
			t.Errorf("mst runner setup docker --with %q: %v\n%s\nwant it refused with the known names, before any build", with, err, out)
		}
	}

	start = time.Now()
	out, err := mst("runner", "setup", "docker", "--with", "claude-code,codex-cli", "--with", "gemini-cli,everything")
	t.Logf("mst runner setup docker --with …: %s\n%s", time.Since(start).Round(time.Second), out)
	ref := "mst-worker:" + dockerTestVersion + "-node-claude-code-codex-cli-gemini-cli-everything"
	if err != nil || !strings.Contains(out, "built "+ref+" ") || !strings.Contains(out, "node v22.") ||
		!strings.Contains(out, "--runner-option image="+ref) {
		t.Fatalf("mst runner setup docker --with …: %v\n%s\nwant it to build %s with Node 22 and say how to run in it", err, out, ref)
	}

	// The Debian image, built on the way, runs a server linked
	// dynamically against Debian's C library, which the minimal image
	// refuses: here the test server built with cgo, on the offline model.
	debian := "mst-worker:" + dockerTestVersion + "-debian"
	dynamic := t.TempDir()
	build := exec.Command("go", "build", "-o", dynamic+string(filepath.Separator), "github.com/mst-eval/mst/internal/testkit/testserver/cmd/mcp-testserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		need(t, fmt.Sprintf("a C compiler for cgo, to build a dynamically linked server (go build: %v: %s)", err, out))
	}
	f, err := elf.Open(filepath.Join(dynamic, "mcp-testserver"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		t.Fatal("mcp-testserver built with cgo is not linked dynamically")
	}
	f.Close()
	qdir := t.TempDir()
	os.WriteFile(filepath.Join(qdir, "cases.jsonl"), []byte(`{"id": "a", "input": "Please echo 'a'"}`+"\n"+`{"id": "b", "input": "Please echo 'b'"}`+"\n"+`{"id": "c", "input": "Please echo 'c'"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(qdir, "eval.yaml"), []byte(fmt.Sprintf("name: dynamic\ndatasets: [cases.jsonl]\nservers:\n  test: {command: %q}\nvariants:\n  v: {model: offline}\n", filepath.Join(dynamic, "mcp-testserver"))), 0o644)
	out, err = mst("run", filepath.Join(qdir, "eval.yaml"), "--results", filepath.Join(qdir, "results"), "--runner", "docker", "--runner-option", "image="+debian, "--runner-option", "shards=2")
	if err != nil || !regexp.MustCompile(`(?m)^Outcomes +3 answered$`).MatchString(out) {
		t.Errorf("mst run of a dynamically linked server in %s: %v\n%s\nwant its 3 trials answered", debian, err, out)
	}

	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"message": "hello from the image"}}}, InputTokens: 40, OutputTokens: 8},
			{Text: "The server said: hello from the image", InputTokens: 60, OutputTokens: 9},
		},
	}}})
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Dummy keys: the fake provider checks none, and the CLIs refuse to
	// start without one.
	write("secrets.env", "ANTHROPIC_API_KEY=sk-dummy-userland\nOPENAI_API_KEY=sk-dummy-userland\nGEMINI_API_KEY=sk-dummy-userland\n")
	var cases strings.Builder
	for _, id := range []string{"echo-a", "echo-b", "echo-c", "echo-d"} {
		fmt.Fprintf(&cases, `{"id": %q, "input": "Please echo 'hello from the image'", "expect": [{"toolCalled": {"tool": "echo", "server": "everything"}}, {"answerContains": "hello from the image"}]}`+"\n", id)
	}
	write("cases.jsonl", cases.String())
	// Every program is the image's, found on its PATH: the server and the
	// CLIs by their bare names. The fake provider listens on this
	// machine's loopback, which network=host lets the containers reach.
	write("eval.yaml", fmt.Sprintf(`name: userland
datasets: [cases.jsonl]
servers:
  everything: {command: mcp-server-everything, args: [stdio]}
variants:
  claude-code:
    client: claude-code
    model: anthropic/claude-test
    clientOptions: {baseURL: %q, timeout: 180s}
  codex-cli:
    client: codex-cli
    model: openai/gpt-test
    clientOptions: {baseURL: %q, timeout: 180s, requestMaxRetries: 0, streamMaxRetries: 0}
  gemini-cli:
    client: gemini-cli
    model: google/gemini-test
    clientOptions: {baseURL: %q, timeout: 180s}
`, fake.URL, fake.URL+"/v1", fake.URL))
	results := filepath.Join(dir, "results")
	start = time.Now()
	out, err = mst("run", filepath.Join(dir, "eval.yaml"), "--results", results, "--secrets-file", filepath.Join(dir, "secrets.env"),
		"--runner", "docker", "--runner-option", "image="+ref, "--runner-option", "network=host", "--runner-option", "shards=2")
	if err != nil {
		t.Fatalf("mst run in %s: %v\n%s", ref, err, out)
	}
	t.Logf("mst run: %s\n%s", time.Since(start).Round(time.Second), out)
	runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("run folders %v, want one", runs)
	}
	st, err := store.OpenRunDir(runs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	st.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		seen[tr.Variant]++
		if tr.Outcome.Status != transcript.Answered || len(tr.ToolCalls) != 1 || tr.ToolCalls[0].Server != "everything" || tr.ToolCalls[0].Tool != "echo" ||
			!strings.Contains(tr.ToolCalls[0].Result, "hello from the image") || tr.Client.Name != tr.Variant || tr.Client.Version == "" {
			t.Errorf("%s/%s: outcome %+v, client %+v, calls %+v", tr.Case, tr.Variant, tr.Outcome, tr.Client, tr.ToolCalls)
		}
		return nil
	})
	for _, v := range []string{"claude-code", "codex-cli", "gemini-cli"} {
		if seen[v] != 4 {
			t.Errorf("variant %s: %d transcripts, want 4 (one per case); all: %v", v, seen[v], seen)
		}
	}
	// run.json names the image each shard ran in, pinned by its id.
	b, err := os.ReadFile(filepath.Join(runs[0], "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("run.json is not JSON:\n%s", b)
	}
	if !strings.Contains(string(b), `"image": "`+ref+`@sha256:`) {
		t.Errorf("run.json does not record the image %s pinned by digest:\n%s", ref, b)
	}
}

// toolsMST returns a function that runs the static mst dockerTools built,
// with its folder first on PATH, and returns what it printed.
func toolsMST(tools string) func(args ...string) (string, error) {
	env := append(os.Environ(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	return func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(tools, "mst"), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// TestDockerClientPreflight runs a claude-code variant in the minimal
// worker image, which has no Claude Code: the shard fails at its start,
// before any prompt reaches the provider, with the command that builds an
// image that has the CLI.
func TestDockerClientPreflight(t *testing.T) {
	t.Parallel()
	tools := dockerTools(t)
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{{
		Turns: []providertest.Turn{{Text: "no prompt should get here"}},
	}}})
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "secrets.env"), []byte("ANTHROPIC_API_KEY=sk-dummy-preflight\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(`{"id": "a", "input": "Please echo 'a'"}`+"\n"+`{"id": "b", "input": "Please echo 'b'"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(fmt.Sprintf(`name: preflight
datasets: [cases.jsonl]
servers:
  test: {command: %q}
variants:
  claude-code:
    client: claude-code
    model: anthropic/claude-test
    clientOptions: {baseURL: %q}
`, filepath.Join(tools, "mcp-testserver"), fake.URL)), 0o644)
	// network=host: were a prompt sent, it would reach the fake provider.
	out, err := toolsMST(tools)("run", filepath.Join(dir, "eval.yaml"), "--results", filepath.Join(dir, "results"),
		"--secrets-file", filepath.Join(dir, "secrets.env"), "--runner", "docker", "--runner-option", "network=host")
	t.Logf("mst run: %v\n%s", err, out)
	for _, want := range []string{"readiness check failed", "variant claude-code", "the Claude Code CLI (claude) is not installed", "`mst runner setup docker --with claude-code`"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("mst run of a claude-code variant in the minimal image: %v\n%s\nwant it to fail saying %q", err, out, want)
		}
	}
	if got := fake.Requests(); len(got) != 0 {
		t.Errorf("the provider got %d requests, want none: the shard must fail before any prompt", len(got))
	}
}

// TestDockerPython builds the Python worker image the way a user does,
// `mst runner setup docker --with python` (its build installs Debian's
// python3 with apt, on the host's network), and runs an eval whose server
// is a Python script, testdata/python-server/server.py, in it.
func TestDockerPython(t *testing.T) {
	t.Parallel()
	tools := dockerTools(t)
	debianBase(t)
	mst := toolsMST(tools)
	start := time.Now()
	out, err := mst("runner", "setup", "docker", "--with", "python", "--runner-option", "network=host")
	t.Logf("mst runner setup docker --with python: %s\n%s", time.Since(start).Round(time.Second), out)
	ref := "mst-worker:" + dockerTestVersion + "-python"
	if err != nil || !strings.Contains(out, "built "+ref+" ") || !strings.Contains(out, "python 3.") {
		if strings.Contains(out, "Unable to locate package") || strings.Contains(out, "Temporary failure resolving") {
			need(t, "a Debian mirror the Docker host's builds reach, for the Python image's apt install:\n"+out)
		}
		t.Fatalf("mst runner setup docker --with python: %v\n%s\nwant it to build %s with Python 3", err, out, ref)
	}
	server, err := filepath.Abs(filepath.Join("testdata", "python-server", "server.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var cases strings.Builder
	for _, id := range []string{"a", "b", "c"} {
		fmt.Fprintf(&cases, `{"id": %q, "input": "Please echo 'hello %s'", "expect": [{"toolCalled": {"tool": "echo", "server": "py"}}]}`+"\n", id, id)
	}
	os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(cases.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "eval.yaml"), []byte(fmt.Sprintf("name: python\ndatasets: [cases.jsonl]\nservers:\n  py: {command: python3, args: [%q]}\nvariants:\n  v: {model: offline}\n", server)), 0o644)
	results := filepath.Join(dir, "results")
	out, err = mst("run", filepath.Join(dir, "eval.yaml"), "--results", results, "--runner", "docker", "--runner-option", "image="+ref, "--runner-option", "shards=2")
	if err != nil || !regexp.MustCompile(`(?m)^Outcomes +3 answered$`).MatchString(out) {
		t.Fatalf("mst run of a Python server in %s: %v\n%s\nwant its 3 trials answered", ref, err, out)
	}
	runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("run folders %v, want one", runs)
	}
	st, err := store.OpenRunDir(runs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	st.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		n++
		if len(tr.ToolCalls) != 1 || tr.ToolCalls[0].Server != "py" || !strings.Contains(tr.ToolCalls[0].Result, "hello "+tr.Case+" (echoed by Python 3.") {
			t.Errorf("%s: tool calls %+v, want one echo from the image's Python", tr.Case, tr.ToolCalls)
		}
		return nil
	})
	if n != 3 {
		t.Errorf("%d transcripts, want 3", n)
	}
}

// debianBase makes sure the Docker host has docker.DebianBase, the public
// image the Debian worker image starts FROM. No registry is reachable
// here, so it builds one as Debian's own images are built, from Debian's
// packages (mmdebstrap, minbase variant), and imports it under that name.
// Without mmdebstrap the test fails under CI and skips elsewhere.
func debianBase(t *testing.T) {
	t.Helper()
	if exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", docker.DebianBase).Run() == nil {
		return
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		need(t, "mmdebstrap, which builds the "+docker.DebianBase+" base image from Debian's packages (apt-get install mmdebstrap; scripts/test does it as root)")
	}
	suite, _, _ := strings.Cut(strings.TrimPrefix(docker.DebianBase, "debian:"), "-")
	tar := filepath.Join(t.TempDir(), "debian.tar")
	if out, err := exec.Command("mmdebstrap", "--quiet", "--variant=minbase", suite, tar).CombinedOutput(); err != nil {
		t.Fatalf("mmdebstrap --variant=minbase %s: %v\n%s", suite, err, out)
	}
	if out, err := exec.Command("docker", "import", tar, docker.DebianBase).CombinedOutput(); err != nil {
		t.Fatalf("docker import %s: %v\n%s", docker.DebianBase, err, out)
	}
}

// need stops a test that lacks a part: a failure under CI, a skip
// elsewhere.
func need(t *testing.T, what string) {
	t.Helper()
	testneed.Missing(t, "this test needs "+what)
}

// TestRunnerSetupWithUsage checks that --with, which builds docker worker
// images, is refused for every runner that builds no image.
func TestRunnerSetupWithUsage(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"local", "processes"} {
		code, out, errOut := mstRun(t, "runner", "setup", name, "--with", "node")
		if code != int(cli.ExitUsage) || !strings.Contains(errOut, "only the docker runner takes --with") || strings.Contains(out, "needs no setup") {
			t.Errorf("mst runner setup %s --with node = %d\nstdout: %s\nstderr: %s\nwant a usage error that says only docker takes --with", name, code, out, errOut)
		}
	}
}
