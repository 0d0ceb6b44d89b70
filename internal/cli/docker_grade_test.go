package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/internal/testkit/testneed"

	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/canarytest"
)

// testDockerGradeKeys runs mst run --runner docker --grade-runner docker on
// an eval whose client and judge both call the fake provider, each with a
// key from the secrets file. While a collect worker waits on the model, and
// again while a grade worker does, every process of this test and of the
// Docker host's containers is read: none holds the judge key in its argv
// or environment. The grades come back from the grade shards (the judge's
// requests carry its key); afterwards no kept container's configuration or
// files (a collect worker's bundle and results, a grade worker's), no
// stored file and no line MST printed holds the judge key.
func testDockerGradeKeys(t *testing.T, tools string) {
	if runtime.GOOS != "linux" {
		testneed.Missing(t, "this test reads processes from /proc: it needs Linux")
	}
	const (
		judgeKey  = "canary-judge-key-docker-5e21"
		clientKey = "canary-client-key-docker-83a0"
	)
	holdsJudge := func(b []byte) bool { return canarytest.Holds(b, "JUDGE_KEY", judgeKey) }
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
		providertest.JudgeConversation("<rubric>", providertest.JudgeReply{Verdict: "pass", Score: 4, Rationale: "echoed"}.Turn()),
		{Turns: []providertest.Turn{
			{ToolCalls: []providertest.Call{{Tool: "echo", Arguments: map[string]any{"text": "hi"}}}},
			{Text: "It said: echo: hi"},
		}},
	}})
	// scan reads every process of this test and of the host's containers,
	// once, when the first request of a phase reaches the model: the
	// worker that sent it is waiting on the answer.
	scan := func(phase, worker string) {
		procs := canarytest.Descendants(os.Getpid())
		found := false
		for _, pid := range containerPIDs(t) {
			in := canarytest.InNamespaceOf(pid)
			for _, p := range in {
				found = found || bytes.Contains(p.Cmdline, []byte(worker))
			}
			procs = append(procs, in...)
		}
		for _, p := range procs {
			if holdsJudge(p.Cmdline) || holdsJudge(p.Environ) {
				t.Errorf("%s: process %d (%q) holds the judge key in its argv or environment", phase, p.PID, p.Cmdline)
			}
		}
		if !found {
			t.Errorf("%s: no process %q was found in a container while it waited on the model", phase, worker)
		}
	}
	clientURL := scanningProxy(t, fake.URL, func() { scan("collecting", "collect") })
	judgeURL := scanningProxy(t, fake.URL, func() { scan("grading", "grade-shard") })

	dir := t.TempDir()
	var cases strings.Builder
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&cases, `{"id": "c%d", "input": "Please echo 'word %d'"}`+"\n", i, i)
	}
	files := map[string]string{
		"eval.yaml": `name: dockerjudge
datasets: [cases.jsonl]
servers:
  test: {command: ` + strconv.Quote(filepath.Join(tools, "mcp-testserver")) + `}
variants:
  v:
    model: anthropic/claude-test
    clientOptions: {baseURL: "` + clientURL + `"}
trials: 1
graders:
  - toolCalled: echo
  - judge: {rubric: supported, model: anthropic/claude-judge, baseURL: "` + judgeURL + `", apiKeyEnv: JUDGE_KEY}
limits: {concurrency: 1}
`,
		"cases.jsonl": cases.String(),
		"secrets.env": "JUDGE_KEY=" + judgeKey + "\nANTHROPIC_API_KEY=" + clientKey + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mst := filepath.Join(tools, "mst")
	results := filepath.Join(dir, "results")
	// The containers are kept, to read their configuration and files
	// afterwards; the judge and the client are on this machine's loopback.
	cmd := exec.Command(mst, "run", filepath.Join(dir, "eval.yaml"), "--results", results, "--secrets-file", filepath.Join(dir, "secrets.env"),
		"--runner", "docker", "--runner-option", "shards=2", "--runner-option", "network=host", "--runner-option", "keep=always",
		"--grade-runner", "docker", "--json", "--verbose")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	runs, _ := filepath.Glob(filepath.Join(results, "*", "runs", "*"))
	if len(runs) == 1 {
		id := filepath.Base(runs[0])
		defer func() {
			if out, err := exec.Command(mst, "runner", "cleanup", id, "--runner", "docker").CombinedOutput(); err != nil {
				t.Errorf("mst runner cleanup %s: %v\n%s", id, err, out)
			}
		}()
	}
	if err != nil {
		t.Fatalf("mst run --grade-runner docker: %v\n%s", err, stderr.String())
	}
	if len(runs) != 1 {
		t.Fatalf("runs stored: %v, want one", runs)
	}
	id := filepath.Base(runs[0])
	if !strings.Contains(stderr.String(), "grading 4 trials on the runner docker") {
		t.Errorf("mst run did not grade on the runner docker:\n%s", stderr.String())
	}

	// The grades came back from the grade shards, judged with the key.
	var rep struct {
		Variants []struct {
			Passed, Graded int
			Judges         []struct{ Scored, Passed int }
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the report: %v\n%s", err, stdout.String())
	}
	if len(rep.Variants) != 1 || rep.Variants[0].Graded != 4 || rep.Variants[0].Passed != 4 ||
		len(rep.Variants[0].Judges) != 1 || rep.Variants[0].Judges[0].Scored != 4 {
		t.Errorf("the report's variants = %+v; want 4 trials graded and passed, each scored by the judge", rep.Variants)
	}
	judged, asked := 0, 0
	for _, r := range fake.Requests() {
		key := r.Header.Get("x-api-key") + r.Header.Get("Authorization")
		if strings.Contains(r.FirstUserText, "<rubric>") {
			judged++
			if !strings.Contains(key, judgeKey) {
				t.Errorf("a judge request lacks the judge's key")
			}
			continue
		}
		asked++
		if strings.Contains(key, judgeKey) || !strings.Contains(key, clientKey) {
			t.Errorf("a client request carries the judge's key, or lacks the client's")
		}
	}
	if judged != 4 || asked == 0 {
		t.Errorf("%d judge requests and %d client requests; want 4 judged trials, and the client to have asked", judged, asked)
	}
	grades, err := os.ReadFile(filepath.Join(runs[0], "grades.jsonl"))
	if err != nil || bytes.Count(grades, []byte("\n")) != 4 {
		t.Errorf("grades.jsonl: %d lines (%v), want one grade per trial", bytes.Count(grades, []byte("\n")), err)
	}

	// The kept containers: collect shards (mst-ID-N) and grade shards
	// (mst-ID-N-grade).
	out, err := exec.Command("docker", "ps", "-a", "--format", "{{.ID}} {{.Names}}", "--filter", "label=mst.run="+id).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	collect, gradeShards := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cid, name, _ := strings.Cut(line, " ")
		inspect, err := exec.Command("docker", "inspect", cid).Output()
		if err != nil {
			t.Fatalf("docker inspect %s: %v", name, err)
		}
		if holdsJudge(inspect) {
			t.Errorf("container %s: its configuration (argv, environment, labels) holds the judge key", name)
		}
		// Everything the worker had on its disk: a collect worker's bundle
		// as it got it, and what either wrote. A grade worker holds the
		// judge key in memory only.
		fsTar, err := exec.Command("docker", "export", cid).Output()
		if err != nil {
			t.Fatalf("docker export %s: %v", name, err)
		}
		if holdsJudge(fsTar) {
			t.Errorf("container %s: a file holds the judge key", name)
		}
		if strings.HasSuffix(name, "-grade") {
			gradeShards++
			continue
		}
		collect++
		if !bytes.Contains(fsTar, []byte("work/bundle/")) {
			t.Errorf("container %s: no bundle in its files, so the search above saw none", name)
		}
	}
	if collect != 2 || gradeShards == 0 {
		t.Errorf("kept containers:\n%s\nwant two collect shards and the grade shards", out)
	}

	filepath.WalkDir(results, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(path); holdsJudge(b) || canarytest.Holds(b, "ANTHROPIC_API_KEY", clientKey) {
			t.Errorf("%s holds a key", path)
		}
		return nil
	})
	if holdsJudge(stdout.Bytes()) || holdsJudge(stderr.Bytes()) {
		t.Errorf("mst's output or log holds the judge key")
	}
}

// scanningProxy is a proxy in front of target that calls scan once, when
// the first request arrives, before passing it on.
func scanningProxy(t *testing.T, target string, scan func()) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(scan)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// containerPIDs are the main processes of the Docker host's running
// containers.
func containerPIDs(t *testing.T) []int {
	ids, err := exec.Command("docker", "ps", "-q").Output()
	if err != nil {
		t.Errorf("docker ps: %v", err)
		return nil
	}
	var out []int
	for _, id := range strings.Fields(string(ids)) {
		pid, err := exec.Command("docker", "inspect", "--format", "{{.State.Pid}}", id).Output()
		if n, _ := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}
