package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/client/desktop/standin"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestDockerDesktop runs an eval with two cowork variants in the desktop
// worker image, the way a user runs Claude Desktop: the app (here the
// stand-in, from a Debian package) added with `mst runner setup docker
// --desktop --desktop-package … --desktop-app …`, two docker shards that
// run one at a time (cowork needs its Docker host to itself), owned-desktop
// mode writing each variant's managed settings, a variant that renames and
// redescribes a tool through MST's proxy, and every transcript graded.
func TestDockerDesktop(t *testing.T) {
	t.Parallel()
	tools := dockerTools(t)
	debianBase(t)
	mst := toolsMST(tools)
	deb, err := standin.Package(t.TempDir())
	if err != nil {
		testneed.Missing(t, err.Error())
	}
	start := time.Now()
	out, err := mst("runner", "setup", "docker", "--desktop", "--desktop-package", deb, "--desktop-app", standin.Command, "--runner-option", "network=host")
	t.Logf("mst runner setup docker --desktop: %s\n%s", time.Since(start).Round(time.Second), out)
	m := regexp.MustCompile(`--runner-option image=(\S+)`).FindAllStringSubmatch(out, -1)
	if err != nil || len(m) == 0 {
		t.Fatalf("mst runner setup docker --desktop: %v\n%s\nwant it to print the image to run in", err, out)
	}
	image := m[len(m)-1][1]

	desc := "Shout the given text back, loudly."
	// MST's offline model plays the model: it picks the offered tool whose
	// name and description share the most words with the prompt, so each
	// variant's own tool list decides what it calls.
	fake := providertest.New(t, providertest.Script{Offline: true})
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The app reads the provider's address and key from the environment
	// MST gives it (the client's keys): the fake provider on this
	// machine's loopback, which network=host lets the containers reach.
	write("secrets.env", "ANTHROPIC_API_KEY=sk-dummy-desktop\nANTHROPIC_BASE_URL="+fake.URL+"\n")
	var cases strings.Builder
	for _, id := range []string{"a", "b", "c"} {
		fmt.Fprintf(&cases, `{"id": %q, "input": "Please echo the text 'hello from the desktop ✓ %s' back", "expect": [{"toolCalled": {"tool": "echo", "server": "test"}}, {"answerContains": "hello from the desktop"}]}`+"\n", id, id)
	}
	// Cases that make the app misbehave (the stand-in's switches): one that
	// hangs until the trial's timeout, one that crashes the app, and one
	// that leaves a stray window over it after answering. The trials after
	// them must still get their answers: MST diagnoses and resets the app.
	cases.WriteString(`{"id": "hang", "input": "Please echo the text 'waiting' back #standin:hang"}` + "\n")
	cases.WriteString(`{"id": "crash", "input": "Please echo the text 'falling' back #standin:crash"}` + "\n")
	cases.WriteString(`{"id": "stray", "input": "Please echo the text 'hello from the desktop ✓ stray' back #standin:stray", "expect": [{"toolCalled": {"tool": "echo", "server": "test"}}, {"answerContains": "hello from the desktop"}]}` + "\n")
	write("cases.jsonl", cases.String())
	// The shout variant offers echo as "shout" with its own description.
	write("eval.yaml", `name: desktop
datasets: [cases.jsonl]
servers:
  test: {command: `+strconv.Quote(filepath.Join(tools, "mcp-testserver"))+`}
variants:
  plain:
    client: cowork
    model: anthropic/claude-test
    clientOptions: {timeout: 20s}
  shout:
    client: cowork
    model: anthropic/claude-test
    clientOptions: {timeout: 20s}
    tools:
      test:
        echo: {name: shout, description: `+strconv.Quote(desc)+`}
`)
	results := filepath.Join(dir, "results")
	start = time.Now()
	out, err = mst("run", filepath.Join(dir, "eval.yaml"), "--results", results, "--secrets-file", filepath.Join(dir, "secrets.env"),
		"--runner", "docker", "--runner-option", "image="+image, "--runner-option", "network=host", "--runner-option", "shards=2")
	t.Logf("mst run: %s\n%s", time.Since(start).Round(time.Second), out)
	if err != nil && !strings.Contains(out, "Outcomes") {
		t.Fatalf("mst run in %s: %v", image, err)
	}
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
		app, _ := tr.ClientTelemetry["clientApp"].(map[string]any)
		diag, _ := tr.ClientTelemetry["diagnosis"].(map[string]any)
		switch tr.Case {
		case "hang":
			shot, _ := diag["screenshot"].(map[string]any)
			if tr.Outcome.Status != transcript.TimedOut || shot["data"] == nil || diag["status"] != "working" {
				t.Errorf("%s/hang: outcome %+v, diagnosis %v", tr.Variant, tr.Outcome, diag)
			}
			return nil
		case "crash":
			if tr.Outcome.Status != transcript.Errored || !strings.Contains(tr.Outcome.Detail, "exited") || !strings.Contains(fmt.Sprint(diag["app"]), "not on the accessibility bus") {
				t.Errorf("%s/crash: outcome %+v, diagnosis %v", tr.Variant, tr.Outcome, diag)
			}
			return nil
		}
		if tr.Outcome.Status != transcript.Answered || !strings.Contains(tr.Answer, "hello from the desktop ✓") ||
			len(tr.ToolCalls) != 1 || tr.ToolCalls[0].Server != "test" || tr.ToolCalls[0].Tool != "echo" || tr.ToolCalls[0].Evidence != transcript.EvidenceServer || len(tr.Discrepancies) > 0 ||
			tr.Client.Name != "cowork" || tr.Client.Version != "1.0.0" || app["version"] != "1.0.0" || tr.Environment.OS != "linux" || tr.Environment.Runner != "docker" {
			t.Errorf("%s/%s: outcome %+v, answer %q, client %+v, app %v, environment %+v, calls %+v", tr.Case, tr.Variant, tr.Outcome, tr.Answer, tr.Client, app, tr.Environment, tr.ToolCalls)
		}
		if tr.Variant == "shout" && len(tr.ToolCalls) == 1 && tr.ToolCalls[0].OfferedAs != "shout" {
			t.Errorf("%s/shout: the call was offered as %q, want shout", tr.Case, tr.ToolCalls[0].OfferedAs)
		}
		return nil
	})
	if seen["plain"] != 6 || seen["shout"] != 6 {
		t.Errorf("transcripts per variant: %v, want 6 each", seen)
	}
	// The model saw each variant's tools as the variant offers them.
	var shouted bool
	for _, r := range fake.Requests() {
		body := string(r.Body)
		if strings.Contains(body, desc) {
			shouted = true
			if strings.Contains(body, `"name":"echo"`) {
				t.Errorf("a request offers both echo and its renamed form:\n%s", body)
			}
		}
	}
	if !shouted {
		t.Error("no request offered the shout variant's tool")
	}
	if !regexp.MustCompile(`(?m)^Outcomes +8 answered, 2 timed out, 2 errored`).MatchString(out) {
		t.Errorf("mst run's summary does not say 8 answered, 2 timed out, 2 errored:\n%s", out)
	}
	// Every case with expectations passes in both variants; the hang,
	// timed out, is graded a failure, and the crash, errored, is not graded.
	for _, re := range []string{`(?m)^ *plain +cowork .* 4/5 `, `(?m)^ *shout +cowork .* 4/5 `, `(?m)^ +hang +0/1 +0/1$`, `(?m)^ +stray +1/1 +1/1$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("mst run's report does not match %s:\n%s", re, out)
		}
	}
}
