package htmlreport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport"
	"github.com/mst-eval/mst/transcript"
)

// memSource is a run held in memory.
type memSource struct {
	grades      []grade.TrialGrade
	transcripts []*transcript.Transcript
}

func (m *memSource) Grades(ctx context.Context, fn func(grade.TrialGrade) error) error {
	for _, g := range m.grades {
		if err := fn(g); err != nil {
			return err
		}
	}
	return nil
}

// documents is the number of JSON documents a page of m embeds: one a
// transcript and one a grade of a trial with a transcript.
func (m *memSource) documents() int {
	has := map[transcript.Key]bool{}
	for _, t := range m.transcripts {
		has[t.Key] = true
	}
	n := len(has)
	for _, g := range m.grades {
		if has[g.Key] {
			n++
		}
	}
	return n
}

func (m *memSource) Transcripts(ctx context.Context, fn func(*transcript.Transcript) error) error {
	for _, t := range m.transcripts {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

// fixture is a run with its report.
type fixture struct {
	rec transcript.Run
	rep report.Report
	src *memSource
}

// html writes the fixture's page.
func (f fixture) html(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := htmlreport.Write(context.Background(), &buf, f.rep, f.rec, f.src); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// reportJSON is the report as mst report --json prints it.
func (f fixture) reportJSON(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f.rep); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// spec says what a fixture holds.
type spec struct {
	cases, variants, trials int
	// name makes a case id, variant name or any text of the run from a
	// plain one: hostile text for the escaping tests.
	name func(string) string
	// missing leaves out every missing-th trial (0: none).
	missing int
	// judges grade every graded trial after the fixture's two graders.
	judges []judgeSpec
}

// judgeSpec is an LLM judge of a fixture: it scores the trials of the
// variants it names (of all when none), on its scale, or errors on each
// of them when errors is set.
type judgeSpec struct {
	grader, hash string
	scale        grade.Scale
	variants     []int
	errors       bool
}

// makeFixture builds a run whose trials pass, fail, error (each cause),
// get cancelled and are missing, with tool calls of every kind: seen by the
// proxy, only reported by the client, simulated, with an injected fault,
// renamed, failed; and discrepancies.
func makeFixture(s spec) fixture {
	if s.name == nil {
		s.name = func(x string) string { return x }
	}
	start := time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC)
	var variants []string
	var infos []report.VariantInfo
	for v := range s.variants {
		name := s.name(fmt.Sprintf("variant-%d", v))
		variants = append(variants, name)
		infos = append(infos, report.VariantInfo{Name: name, Client: "api", Model: s.name("offline"), Description: s.name("the variant's description")})
	}
	var cases []string
	for c := range s.cases {
		cases = append(cases, s.name(fmt.Sprintf("case-%04d", c)))
	}
	rec := transcript.Run{
		Kind: "mst.run", Version: transcript.RunVersion, ID: s.name("run-20261130-101500-a1b2c3"), Eval: s.name("fixture eval"),
		ConfigFile: "eval.yaml", ConfigHash: "abc123", MSTVersion: "0.1.0-test", Started: start, Ended: start.Add(time.Hour),
		Runner: transcript.RunnerInfo{Name: "local", Shards: 1, Options: map[string]string{"image": s.name("img")},
			Machines: []transcript.Machine{{Shard: 0, ID: s.name("machine"), Trials: s.cases * s.variants * s.trials, Ended: "done", CleanupOK: true, Attempt: 1, ClientVersions: map[string]string{"api": s.name("1.0")}}}},
		Variants: variants, Cases: s.cases, Trials: s.trials, Collect: transcript.CollectComplete,
	}
	src := &memSource{}
	var trials []report.Trial
	n := 0
	for ci, c := range cases {
		for vi, v := range variants {
			for k := 1; k <= s.trials; k++ {
				n++
				if s.missing > 0 && n%s.missing == 0 {
					continue
				}
				tr, g := makeTrial(s, rec.ID, transcript.Key{Case: c, Variant: v, Trial: k}, ci, vi, n, start)
				src.transcripts = append(src.transcripts, tr)
				src.grades = append(src.grades, g)
				trials = append(trials, report.NewTrial(g))
			}
		}
	}
	rep := report.Build(report.Input{Run: rec, Variants: infos, Cases: cases, Trials: trials})
	return fixture{rec: rec, rep: rep, src: src}
}

func makeTrial(s spec, run string, k transcript.Key, ci, vi, n int, start time.Time) (*transcript.Transcript, grade.TrialGrade) {
	at := start.Add(time.Duration(n) * time.Second)
	prompt := s.name(fmt.Sprintf("What is the weather in city %d tomorrow?", ci))
	args, _ := json.Marshal(map[string]any{"city": s.name(fmt.Sprintf("city %d", ci)), "days": 2})
	result := s.name(fmt.Sprintf("Forecast for city %d: rain, high 8°C, low 3°C", ci))
	call := transcript.ToolCall{ID: "call_1", Server: "weather", Tool: "wx_forecast", Arguments: args, Result: result,
		Started: at, DurationMs: 2.5, Evidence: transcript.EvidenceServer}
	switch n % 5 {
	case 1:
		call.OfferedAs = s.name("forecast")
	case 2:
		call.Simulated = true
	case 3:
		call.Injected = "latency 500ms"
	case 4:
		call.IsError = true
	}
	clientCall := call
	clientCall.Evidence = ""
	answer := s.name(fmt.Sprintf("Tomorrow in city %d: rain, 8°C.", ci))
	t := &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Run: run, Key: k,
		Client: transcript.ClientInfo{Name: "api", Version: "go1.26"}, Model: "offline",
		Servers: []transcript.ServerInfo{{Name: "weather", Transport: "stdio", Tools: []string{"wx_forecast", "wx_now"}, ToolsHash: "b7e6", Implementation: s.name("weather 1.0.0"), ServerToolsHash: "ba45"}},
		Prompt:  prompt,
		Messages: []transcript.Message{
			{Role: "user", Text: prompt},
			{Role: "assistant", ToolCalls: []string{"call_1"}},
			{Role: "tool", Text: result, ToolCall: "call_1"},
			{Role: "assistant", Text: answer},
		},
		ToolCalls: []transcript.ToolCall{call}, ClientToolCalls: []transcript.ToolCall{clientCall},
		Answer:          answer,
		Usage:           transcript.Usage{InputTokens: 500 + int64(n%7), OutputTokens: 40, ModelCalls: 2},
		Timing:          transcript.Timing{Started: at, Ended: at.Add(1500 * time.Millisecond), DurationMs: 1500 + float64(n%13), SetupMs: 20},
		Outcome:         transcript.Outcome{Status: transcript.Answered},
		Environment:     transcript.Environment{Runner: "local", OS: "linux", Arch: "amd64"},
		ClientTelemetry: map[string]any{"stopReason": s.name("end_turn")},
	}
	if n%11 == 0 {
		t.Discrepancies = []transcript.Discrepancy{{Kind: transcript.Unreported, Server: "weather", Tool: "wx_now", Call: "p2", Detail: s.name("the server got a call the client does not report")}}
	}
	switch {
	case n%17 == 0:
		t.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: []string{transcript.CauseProvider, transcript.CauseServer, transcript.CauseClient}[n%3], Detail: s.name("the provider answered 529 overloaded")}
		t.Answer, t.Messages = "", t.Messages[:2]
	case n%23 == 0:
		t.Outcome = transcript.Outcome{Status: transcript.Cancelled, Detail: "interrupted"}
		t.Answer, t.Messages = "", t.Messages[:1]
	case n%19 == 0:
		t.Outcome = transcript.Outcome{Status: transcript.TimedOut, Detail: "timeout 2m passed"}
	}
	g := grade.TrialGrade{Key: k, Trial: transcript.Summarize(t)}
	if g.Trial.Status == transcript.Answered || g.Trial.Status == transcript.TimedOut {
		g.Graded = true
		ok := (ci*7+vi*3+n)%4 != 0
		g.Results = []grade.Result{{Grader: s.name(`toolCalled wx_forecast{city:"Oslo"}`), Passed: true}, {Grader: "answerContains rain", Passed: ok}}
		if !ok {
			g.Results[1].Detail = s.name("the answer does not contain \"rain\"")
		}
		g.Passed = ok && g.Trial.Status == transcript.Answered
		if g.Trial.Status == transcript.TimedOut {
			g.Failed = "timed out"
		}
		for ji, j := range s.judges {
			if len(j.variants) > 0 && !slices.Contains(j.variants, vi) {
				continue
			}
			r := grade.Result{Grader: j.grader, Judge: &grade.Verdict{Hash: j.hash, Model: "offline", Scale: j.scale}}
			if j.errors {
				r.Error = "the judge model answered in another shape"
				if g.Errored == "" {
					g.Errored = r.Grader + ": " + r.Error
				}
				g.Graded, g.Passed, g.Failed = false, false, ""
			} else {
				r.Judge.Score = float64(j.scale.Min + (ci*3+n+ji)%(j.scale.Max-j.scale.Min+1))
				r.Passed = 2*r.Judge.Score >= float64(j.scale.Min+j.scale.Max)
				r.Judge.Verdict = map[bool]string{true: "pass", false: "fail"}[r.Passed]
				r.Judge.Rationale = s.name("the answer names the forecast")
			}
			g.Results = append(g.Results, r)
		}
	}
	return t, g
}
