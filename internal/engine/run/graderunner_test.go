//go:build linux

package run_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/internal/testkit/canarytest"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// gradedEval is an eval of six cases the offline model answers, graded by
// a deterministic grader and by a judge on the fake provider whose key is
// JUDGE_KEY; its server reads SRV_TOKEN, a secret collect workers need.
func gradedEval(t *testing.T, judgeURL string) string {
	var cases strings.Builder
	for i, id := range []string{"a", "b", "c", "über-🦉", strings.Repeat("長", 80), "f"} {
		fmt.Fprintf(&cases, `{"id": %q, "input": "Please echo 'word %d'"}`+"\n", id, i)
	}
	return writeEval(t, map[string]string{
		"eval.yaml": `
name: graderunner
datasets: [cases.jsonl]
servers:
  test:
    command: SERVER
    env: {SRV_TOKEN: "${secret:SRV_TOKEN}"}
variants:
  v: {model: offline}
  w: {model: offline}
graders:
  - toolCalled: echo
  - judge: {rubric: supported, model: anthropic/claude-judge, baseURL: "` + judgeURL + `", apiKeyEnv: JUDGE_KEY}
limits: {concurrency: 2, providers: {anthropic: 2}}
`,
		"cases.jsonl": cases.String(),
	})
}

// judgeScript passes every judge request.
func judgeScript() providertest.Script {
	return providertest.Script{Conversations: []providertest.Conversation{
		providertest.JudgeConversation("Please echo", providertest.JudgeReply{Verdict: "pass", Score: 4, Rationale: "echoed"}.Turn()),
	}}
}

// watched is def whose shards copy what the coordinator writes to each
// worker into tap, and call seen once with each worker's first line.
func watched(def *runner.Definition, tap io.Writer, seen func(runner.Shard)) *runner.Definition {
	return wrapRunner(def, func(r runner.Runner) runner.Runner { return watchRunner{r, tap, seen, nil} })
}

// heardBy is def whose shards hand heard every chunk their worker writes to
// the coordinator, before the coordinator reads it.
func heardBy(def *runner.Definition, heard func([]byte)) *runner.Definition {
	return wrapRunner(def, func(r runner.Runner) runner.Runner { return watchRunner{r, io.Discard, nil, heard} })
}

type watchRunner struct {
	runner.Runner
	tap   io.Writer
	seen  func(runner.Shard)
	heard func([]byte)
}

func (r watchRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	serve := s.Serve
	s.Serve = func(ctx context.Context, in io.Reader, out io.Writer, fetch runner.Fetch) error {
		var once sync.Once
		rd := readFunc(func(p []byte) (int, error) {
			n, err := in.Read(p)
			if n > 0 && r.seen != nil {
				once.Do(func() { r.seen(s) }) // the worker is running: it wrote
			}
			if n > 0 && r.heard != nil {
				r.heard(p[:n])
			}
			return n, err
		})
		return serve(ctx, rd, io.MultiWriter(out, r.tap), fetch)
	}
	return r.Runner.RunShard(ctx, s)
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// TestGradeRunnerKeys collects a judged eval on processes workers and
// grades it with --grade-runner processes on two grade shards: the judge's
// requests come from the grade workers with the judge's key; the collect
// workers are sent the server's secret and never the judge's key, the
// grade workers the judge's key and nothing else; no worker has the key in
// its argv or environment; and no stored file, shard folder or log line
// holds it. Every trial gets one grade, made on the runner.
func TestGradeRunnerKeys(t *testing.T) {
	const (
		judgeKey = "canary-judge-key-grade-71c3"
		srvToken = "canary-server-token-grade-0a9d"
	)
	set := secrets.New()
	set.Add("JUDGE_KEY", judgeKey)
	set.Add("SRV_TOKEN", srvToken)
	has := canarytest.Holds
	fake := providertest.New(t, judgeScript())
	p, o, shards, printed := canaryRun(t, gradedEval(t, fake.URL), set)
	collectTap := &lockedBuffer{b: &bytes.Buffer{}}
	gradeTap := &lockedBuffer{b: &bytes.Buffer{}}
	o.Runner = watched(runner.ProcessesDefinition(), collectTap, nil)
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": shards}, Shards: 2, Keep: runner.KeepNever}
	gradeShards := t.TempDir()
	var workers atomic.Int32
	seen := func(s runner.Shard) {
		for _, pr := range canarytest.Descendants(os.Getpid()) {
			if !bytes.Contains(pr.Cmdline, []byte("grade-shard")) {
				continue
			}
			workers.Add(1)
			if has(pr.Cmdline, "JUDGE_KEY", judgeKey) || has(pr.Environ, "JUDGE_KEY", judgeKey) {
				t.Errorf("grade worker %d (%q) holds the judge key in its argv or environment", pr.PID, pr.Cmdline)
			}
		}
	}
	o.GradeOn = &run.GradeOn{
		Runner: watched(runner.ProcessesDefinition(), gradeTap, seen),
		Chosen: run.RunnerChoice{Options: map[string]string{"dir": gradeShards}, Shards: 2, Keep: runner.KeepNever},
		// What mst run sends: the judges' keys, nothing else.
		Secrets: run.OnlyNames(set, p.JudgeKeys()), Limits: p.Config.Limits.Providers,
		MST: o.MST, MSTVersion: o.MSTVersion, Logger: o.Logger,
	}
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	if out.Run.Collect != transcript.CollectComplete {
		t.Fatalf("run %s: %s", out.Run.Collect, out.Run.Note)
	}
	if workers.Load() == 0 {
		t.Fatal("no grade worker was found running under this process")
	}
	reqs := fake.Requests()
	if len(reqs) != out.Run.Counts.Answered || out.Run.Counts.Answered < 10 {
		t.Errorf("%d judge requests, want one per answered trial (%d of 12 answered)", len(reqs), out.Run.Counts.Answered)
	}
	for _, r := range reqs {
		if !strings.Contains(r.Header.Get("x-api-key")+r.Header.Get("Authorization"), judgeKey) {
			t.Errorf("a judge request lacks the judge's key")
		}
	}
	for _, v := range out.Report.Variants {
		n := v.Outcomes.Answered
		if v.Graded != n || v.Passed != n || len(v.Judges) != 1 || v.Judges[0].Scored != n {
			t.Errorf("variant %s: %d graded, %d passed, judges %+v; want its %d answered trials judged and passed", v.Variant, v.Graded, v.Passed, v.Judges, n)
		}
	}
	st, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	grades := map[transcript.Key]int{}
	st.Grades(t.Context(), func(g grade.TrialGrade) error {
		grades[g.Key]++
		return nil
	})
	if len(grades) != 12 {
		t.Errorf("%d trials have grades, want 12", len(grades))
	}
	for k, n := range grades {
		if n != 1 {
			t.Errorf("%s has %d grades, want 1", k, n)
		}
	}
	collected, graded := collectTap.b.Bytes(), gradeTap.b.Bytes()
	if has(collected, "JUDGE_KEY", judgeKey) {
		t.Errorf("a collect worker was sent the judge's key")
	}
	if !has(collected, "SRV_TOKEN", srvToken) {
		t.Errorf("the collect tap saw no server secret: it does not see what workers are sent")
	}
	if !has(graded, "JUDGE_KEY", judgeKey) {
		t.Errorf("the grade workers were not sent the judge's key")
	}
	if has(graded, "SRV_TOKEN", srvToken) {
		t.Errorf("a grade worker was sent the server's secret, which no judge reads")
	}
	for _, dir := range []string{out.Store.Location(), shards, gradeShards} {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, _ := os.ReadFile(path); has(b, "JUDGE_KEY", judgeKey) || has(b, "SRV_TOKEN", srvToken) {
				t.Errorf("%s holds a secret", path)
			}
			return nil
		})
	}
	if has(printed.Bytes(), "JUDGE_KEY", judgeKey) {
		t.Errorf("the log holds the judge's key")
	}
}

// holdAfter is a reverse proxy in front of the fake provider that passes
// the first n requests and holds every later one until its client goes
// away; held is closed when the first request is held.
type holdAfter struct {
	n      atomic.Int64
	count  atomic.Int64
	held   chan struct{}
	once   sync.Once
	passed atomic.Int64
}

func (h *holdAfter) serve(t *testing.T, target string) string {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.count.Add(1) > h.n.Load() {
			// The server notices the client going away only once the
			// body has been read.
			io.Copy(io.Discard, r.Body)
			h.once.Do(func() { close(h.held) })
			<-r.Context().Done()
			return
		}
		proxy.ServeHTTP(w, r)
		h.passed.Add(1)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// messageCounter counts the protocol messages of one type in a worker's
// output as the coordinator reads it, and closes first at the first.
type messageCounter struct {
	pattern []byte
	first   chan struct{}

	mu    sync.Mutex
	carry []byte // the end of the output so far, too short to hold pattern
	n     int
}

func newMessageCounter(typ string) *messageCounter {
	return &messageCounter{pattern: []byte(`"type":"` + typ + `"`), first: make(chan struct{})}
}

// heard counts the messages that end in p; one may have begun in an
// earlier chunk.
func (c *messageCounter) heard(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := append(c.carry, p...)
	was := c.n
	c.n += bytes.Count(buf, c.pattern)
	if was == 0 && c.n > 0 {
		close(c.first)
	}
	c.carry = append([]byte(nil), buf[max(0, len(buf)-len(c.pattern)+1):]...)
}

func (c *messageCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestGradeShardLost grades a stored run with mst grade --runner
// processes, one grade shard, and kills the grade worker once the
// coordinator has received a grade from it and it holds a judge request in
// flight: every grade the coordinator received before the kill is stored,
// the set is partial and the error says how to finish it; a --resume on
// the runner then grades exactly the trials without a grade, and the set
// ends with one grade per trial.
func TestGradeShardLost(t *testing.T) {
	fake := providertest.New(t, judgeScript())
	hold := &holdAfter{held: make(chan struct{})}
	hold.n.Store(5)
	via := hold.serve(t, fake.URL)
	set := secrets.New()
	set.Add("JUDGE_KEY", "canary-judge-key-lost-2b81")
	set.Add("SRV_TOKEN", "canary-server-token-lost-7e44")
	p, o, _, _ := canaryRun(t, gradedEval(t, via), set)
	p.NoGrade = true // collect only; graded below
	out, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	// What grading may find: a trial that errored (a loaded machine) is
	// never graded, and the checks below count only answered trials.
	answered := map[string]int{}
	for _, v := range out.Report.Variants {
		answered[v.Variant] = v.Outcomes.Answered
	}
	if c := out.Run.Counts; c.Answered < 12 {
		// Not a failure of grading: say why, for the log.
		t.Logf("%d of 12 trials answered (%+v): %s", c.Answered, c, out.Run.Note)
		if c.Answered < 10 {
			t.Fatalf("too few trials answered to test grading")
		}
	}
	st, err := store.OpenRunDir(out.Store.Location(), nil)
	if err != nil {
		t.Fatal(err)
	}
	graded := newMessageCounter(protocol.TypeGraded)
	on := func() *run.GradeOn {
		return &run.GradeOn{
			Runner:  heardBy(runner.ProcessesDefinition(), graded.heard),
			Chosen:  run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: 1, Keep: runner.KeepNever},
			Secrets: run.OnlyNames(set, p.JudgeKeys()), Limits: map[string]int{"anthropic": 2},
			MST: o.MST, MSTVersion: o.MSTVersion, Logger: o.Logger,
		}
	}
	specs := p.Config.Graders
	killed := make(chan struct{})
	receivedBefore := 0 // grades the coordinator had received when the kill was sent
	go func() {
		defer close(killed)
		for _, ev := range []chan struct{}{hold.held, graded.first} {
			select {
			case <-ev:
			case <-t.Context().Done():
				return
			}
		}
		receivedBefore = graded.count()
		for _, pr := range canarytest.Descendants(os.Getpid()) {
			if bytes.Contains(pr.Cmdline, []byte("grade-shard")) {
				syscall.Kill(pr.PID, syscall.SIGKILL)
			}
		}
	}()
	_, err = run.Regrade(t.Context(), st, run.RegradeOptions{Graders: specs, On: on()})
	<-killed
	if err == nil || !strings.Contains(err.Error(), "--resume 1") {
		t.Fatalf("Regrade with a killed grade worker = %v; want an error that says how to finish set 1", err)
	}
	log, err := st.GradeSet(t.Context(), "1")
	if err != nil {
		t.Fatal(err)
	}
	first := map[transcript.Key]bool{}
	firstJudged := 0 // answered trials among them: each took a judge request
	log.Grades(t.Context(), func(g grade.TrialGrade) error {
		first[g.Key] = true
		if g.Trial.Status == transcript.Answered {
			firstJudged++
		}
		return nil
	})
	// The set keeps every grade the coordinator received before the kill,
	// and none it never received; the trials in flight have none.
	if received := graded.count(); len(first) < receivedBefore || len(first) > received || len(first) >= 12 {
		t.Fatalf("after the kill set 1 holds %d grades; the coordinator had received %d when the worker was killed and %d in all; want at least %[2]d, at most %[3]d, and fewer than 12", len(first), receivedBefore, received)
	}
	t.Logf("set 1 kept %d grades; the coordinator had received %d when the worker was killed, %d in all", len(first), receivedBefore, graded.count())
	if len(first) > int(hold.passed.Load())+12-out.Run.Counts.Answered {
		t.Fatalf("after the kill set 1 holds %d grades, with %d judge answers given; want at most one per answer or unanswered trial", len(first), hold.passed.Load())
	}

	before := len(fake.Requests())
	hold.n.Store(1 << 30)
	res, err := run.Regrade(t.Context(), st, run.RegradeOptions{Resume: "1", On: on()})
	if err != nil {
		t.Fatalf("Regrade --resume 1 = %v", err)
	}
	if res.Graded != 12-len(first) {
		t.Errorf("the resume graded %d trials, want the %d without a grade", res.Graded, 12-len(first))
	}
	if n, want := len(fake.Requests())-before, out.Run.Counts.Answered-firstJudged; n != want {
		t.Errorf("the resume made %d judge requests, want one per answered trial still to grade (%d)", n, want)
	}
	count := map[transcript.Key]int{}
	log.Grades(t.Context(), func(g grade.TrialGrade) error {
		count[g.Key]++
		return nil
	})
	for k, n := range count {
		if n != 1 {
			t.Errorf("%s has %d grades in set 1, want 1", k, n)
		}
	}
	if len(count) != 12 {
		t.Errorf("set 1 grades %d trials, want 12", len(count))
	}
	for _, v := range res.Report.Variants {
		if n := answered[v.Variant]; v.Graded != n || v.Passed != n {
			t.Errorf("variant %s: %d graded, %d passed; want its %d answered trials", v.Variant, v.Graded, v.Passed, n)
			log.Grades(t.Context(), func(g grade.TrialGrade) error {
				if !g.Graded {
					t.Logf("%s: not graded: status %s (%s) errored %q %+v", g.Key, g.Trial.Status, g.Trial.Detail, g.Errored, g.Results)
				}
				return nil
			})
		}
	}
}
