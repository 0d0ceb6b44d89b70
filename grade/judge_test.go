package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/builtin/provider/openai"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
	"github.com/mst-eval/mst/transcript"
)

const testKey = "judge-key-c0ffee"

// judgeFormats are the wire formats a judge speaks, each as the model
// reference and settings that reach the fake provider with it.
var judgeFormats = []struct {
	name, model, format, api string
	base                     func(url string) string
}{
	{"anthropic", "anthropic/claude-judge", providertest.FormatAnthropic, "", func(u string) string { return u }},
	{"openai responses", "openai/gpt-judge", providertest.FormatResponses, "", func(u string) string { return u + "/v1" }},
	{"openai chat", "openai/gpt-judge", providertest.FormatChat, "chat", func(u string) string { return u + "/v1" }},
}

func testJudges() *Judges {
	return &Judges{
		Providers: provider.NewRegistry(anthropic.Definition(), openai.Definition(), offline.Definition()),
		Key: func(name string) (string, bool) {
			if name == "JUDGE_KEY" {
				return testKey, true
			}
			return "", false
		},
	}
}

// judgeSpec is a judge grader spec reaching base in the given format.
func judgeSpec(model, api, base string, extra string) string {
	s := fmt.Sprintf(`{"judge": {"rubric": "supported", "model": %q, "baseURL": %q, "apiKeyEnv": "JUDGE_KEY"`, model, base)
	if api != "" {
		s += fmt.Sprintf(`, "api": %q`, api)
	}
	return s + extra + "}}"
}

func weatherTrial(prompt string) *transcript.Transcript {
	t := answered("Oslo: rain, 12°C", transcript.ToolCall{
		Server: "weather", Tool: "wx_forecast", Arguments: json.RawMessage(`{"city":"Oslo"}`), Result: "Oslo: rain, high 12°C",
	})
	t.Prompt = prompt
	return t
}

func TestJudgeWireFormats(t *testing.T) {
	t.Parallel()
	for _, f := range judgeFormats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
				providertest.JudgeConversation("Will it rain", providertest.JudgeReply{Verdict: "pass", Score: 4, Rationale: "backed by the forecast"}.Turn()),
				providertest.JudgeConversation("And in Tokyo", providertest.JudgeReply{Verdict: "fail", Score: 2, Rationale: "invents a typhoon"}.Turn()),
			}})
			g := mustParse(t, judgeSpec(f.model, f.api, f.base(fake.URL), ""))
			js := testJudges()

			pass := TrialContext(t.Context(), weatherTrial("Will it rain in Oslo?"), []Grader{g}, js)
			if !pass.Graded || !pass.Passed || pass.Errored != "" {
				t.Fatalf("grade = %+v, want a graded pass", pass)
			}
			v := pass.Results[0].Judge
			if v == nil || v.Verdict != "pass" || v.Score != 4 || v.Rationale != "backed by the forecast" || v.Scale != (Scale{Min: 1, Max: 5}) || v.Model != f.model || len(v.Hash) != 16 {
				t.Errorf("verdict = %+v", v)
			}
			fail := TrialContext(t.Context(), weatherTrial("And in Tokyo?"), []Grader{g}, js)
			if !fail.Graded || fail.Passed || fail.Results[0].Detail != "the judge gave 2/5: invents a typhoon" {
				t.Errorf("grade = %+v, want a graded failure with the rationale", fail)
			}

			reqs := fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			for _, r := range reqs {
				if r.Format != f.format || r.Status != 200 {
					t.Errorf("request in format %q answered %d, want %q answered 200", r.Format, r.Status, f.format)
				}
				key := r.Header.Get("x-api-key") + r.Header.Get("Authorization")
				if !strings.Contains(key, testKey) {
					t.Errorf("the request carries no key from apiKeyEnv: %q", key)
				}
				body := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(string(r.Body))
				if !strings.Contains(body, `"`+strings.TrimPrefix(f.model, "openai/")) && !strings.Contains(body, `"`+strings.TrimPrefix(f.model, "anthropic/")) || strings.Contains(body, `"`+f.model+`"`) {
					t.Errorf("the request names the model wrongly (want the provider's name for it, without the prefix): %s", body)
				}
				for _, want := range []string{JudgeMarker, "no unsupported claims", "wx_forecast", `{\"city\":\"Oslo\"}`, "high 12°C", "<answer>", "<tool_calls>"} {
					if !strings.Contains(body, want) {
						t.Errorf("the request body lacks %q: %s", want, body)
					}
				}
			}
		})
	}
}

func TestJudgeErrorsAreNotFailures(t *testing.T) {
	t.Parallel()
	for _, f := range judgeFormats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			type tc struct {
				name   string
				script providertest.Script
				want   string
			}
			var cases []tc
			for _, m := range providertest.MalformedJudgeAnswers(5) {
				cases = append(cases, tc{"malformed: " + m.Why, providertest.Script{Conversations: []providertest.Conversation{providertest.JudgeConversation("", m.Turn)}}, "the judge model " + f.model})
			}
			refused := "did not answer with the JSON object asked for; it said: \"I can't grade this.\""
			if f.format == providertest.FormatAnthropic {
				refused = "refused to grade (stop reason refusal)"
			}
			cases = append(cases,
				tc{"refusal", providertest.Script{Conversations: []providertest.Conversation{providertest.JudgeConversation("", providertest.JudgeRefusal("I can't grade this."))}}, refused},
				tc{"429 after retries", providertest.Script{Faults: []providertest.Fault{{Status: 429, Times: 3}}}, "429"},
				tc{"server error after retries", providertest.Script{Faults: []providertest.Fault{{Status: 500, Times: 3}}}, "500"},
				tc{"bad key", providertest.Script{Faults: []providertest.Fault{{Status: 401, Times: 1}}}, "401"},
			)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					fake := providertest.New(t, c.script)
					g := mustParse(t, judgeSpec(f.model, f.api, f.base(fake.URL), ""))
					// A deterministic grader that passes, so only the judge decides.
					gs := []Grader{mustParse(t, `{"answerContains": "rain"}`), g}
					got := TrialContext(t.Context(), weatherTrial("Oslo?"), gs, testJudges())
					if got.Graded || got.Passed || !strings.Contains(got.Errored, c.want) || !strings.HasPrefix(got.Errored, g.Name()+": ") {
						t.Errorf("grade = graded %t passed %t errored %q, want an errored grade containing %q", got.Graded, got.Passed, got.Errored, c.want)
					}
					if len(got.Results) != 2 || !got.Results[0].Passed || got.Results[1].Error == "" || got.Results[1].Judge == nil || got.Results[1].Judge.Verdict != "" || got.Results[1].Judge.Hash == "" {
						t.Errorf("results = %+v, want the deterministic pass kept and the judge's error", got.Results)
					}
				})
			}
		})
	}
}

// TestJudgeSilentProvider: a judge whose provider takes the request and
// never answers gives no verdict once Judges.Timeout passes, in every wire
// format: the trial is left ungraded, never held up for ever.
func TestJudgeSilentProvider(t *testing.T) {
	t.Parallel()
	for _, f := range judgeFormats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			fake := providertest.New(t, providertest.Script{Faults: []providertest.Fault{{Hang: true, Times: 10}}})
			g := mustParse(t, judgeSpec(f.model, f.api, f.base(fake.URL), ""))
			js := testJudges()
			js.Timeout = 300 * time.Millisecond
			got := TrialContext(t.Context(), weatherTrial("Oslo?"), []Grader{g}, js)
			if got.Graded || !strings.Contains(got.Errored, "did not answer within 300ms") {
				t.Errorf("grade = graded %t, errored %q; want no verdict, saying the judge did not answer within 300ms", got.Graded, got.Errored)
			}
		})
	}
}

func TestJudgeRetriesARateLimit(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{
		Faults:        []providertest.Fault{{Status: 429, Times: 2}},
		Conversations: []providertest.Conversation{providertest.JudgeConversation("", providertest.JudgeReply{Verdict: "pass", Score: 5}.Turn())},
	})
	g := mustParse(t, judgeSpec("anthropic/claude-judge", "", fake.URL, ""))
	got := TrialContext(t.Context(), weatherTrial("Oslo?"), []Grader{g}, testJudges())
	if !got.Passed || got.Errored != "" {
		t.Errorf("grade = %+v, want a pass once the provider's retries get through", got)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (two 429s, then the verdict)", n)
	}
}

func TestJudgeWithoutKeyOrJudges(t *testing.T) {
	t.Parallel()
	g := mustParse(t, `{"judge": {"rubric": "supported", "model": "anthropic/claude-judge"}}`)
	got := TrialContext(t.Context(), weatherTrial("Oslo?"), []Grader{g}, testJudges())
	if got.Graded || !strings.Contains(got.Errored, "reads its key from ANTHROPIC_API_KEY, which is not set") {
		t.Errorf("without a key: %+v", got)
	}
	got = Trial(weatherTrial("Oslo?"), []Grader{g})
	if got.Graded || !strings.Contains(got.Errored, "no judge model is available here") {
		t.Errorf("without Judges: %+v", got)
	}
}

func TestJudgeGateFalse(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
		providertest.JudgeConversation("fails", providertest.JudgeReply{Verdict: "fail", Score: 1}.Turn()),
		providertest.JudgeConversation("malformed", providertest.Turn{Text: "no idea"}),
	}})
	g := mustParse(t, judgeSpec("anthropic/claude-judge", "", fake.URL, `, "gate": false`))
	for _, prompt := range []string{"fails", "malformed"} {
		got := TrialContext(t.Context(), weatherTrial(prompt), []Grader{g}, testJudges())
		if !got.Graded || !got.Passed || got.Errored != "" || !got.Results[0].Advisory {
			t.Errorf("%s: grade = %+v, want a pass: a judge with gate false decides nothing", prompt, got)
		}
	}
}

func TestJudgeSkipsTrialsWithoutAnswer(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{})
	g := mustParse(t, judgeSpec("anthropic/claude-judge", "", fake.URL, ""))
	for _, status := range []string{transcript.NoAnswer, transcript.TimedOut, transcript.Errored} {
		tr := weatherTrial("Oslo?")
		tr.Outcome.Status = status
		got := TrialContext(t.Context(), tr, []Grader{g}, testJudges())
		if got.Passed || got.Errored != "" {
			t.Errorf("%s: %+v", status, got)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the judge asked %d times about trials without an answer", n)
	}
}

func TestJudgeObeysAcquire(t *testing.T) {
	t.Parallel()
	fake := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
		providertest.JudgeConversation("", providertest.JudgeReply{Verdict: "pass", Score: 3}.Turn()),
	}})
	g := mustParse(t, judgeSpec("anthropic/claude-judge", "", fake.URL, ""))
	js := testJudges()
	const limit = 2
	sem := make(chan struct{}, limit)
	var mu sync.Mutex
	var asked []string
	js.Acquire = func(ctx context.Context, p string) (func(), error) {
		sem <- struct{}{}
		mu.Lock()
		asked = append(asked, p)
		mu.Unlock()
		return func() { <-sem }, nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { TrialContext(t.Context(), weatherTrial("Oslo?"), []Grader{g}, js) })
	}
	wg.Wait()
	if len(asked) != 8 || asked[0] != "anthropic" {
		t.Errorf("Acquire was asked %v, want anthropic 8 times", asked)
	}
	if m := fake.MaxInFlight(); m > limit {
		t.Errorf("%d judge requests in flight at once, above the limit of %d", m, limit)
	}
	js.Acquire = func(ctx context.Context, p string) (func(), error) { return nil, context.Canceled }
	if got := TrialContext(t.Context(), weatherTrial("Oslo?"), []Grader{g}, js); !strings.Contains(got.Errored, "limits.providers") {
		t.Errorf("an Acquire that fails: %+v", got)
	}
}

func TestOfflineJudge(t *testing.T) {
	t.Parallel()
	if offline.JudgeMarker != JudgeMarker {
		t.Fatalf("offline.JudgeMarker %q, grade.JudgeMarker %q: the offline model would not see judges", offline.JudgeMarker, JudgeMarker)
	}
	tests := []struct {
		name, spec, prompt, answer string
		calls                      []transcript.ToolCall
		verdict                    string
		score                      float64
	}{
		{"reference found", `{"rubric": "correct", "reference": "rain, 12"}`, "Oslo?", "Rain and 12°C", nil, "pass", 5},
		{"reference half found", `{"rubric": "correct", "reference": "rain, snow"}`, "Oslo?", "rain", nil, "pass", 3},
		{"reference not found", `{"rubric": "correct", "reference": "sunny, warm, dry"}`, "Oslo?", "Rain", nil, "fail", 1},
		{"task words, scale 0 to 10", `{"criteria": "answers the task", "scale": {"min": 0, "max": 10}}`, "Will it rain in Oslo tomorrow?", "Oslo: rain", nil, "pass", 7},
		{"tool calls only", `{"rubric": "rightTools"}`, "Forecast for Oslo", "nothing relevant",
			[]transcript.ToolCall{{Server: "weather", Tool: "wx_forecast", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}, "pass", 5},
		{"answer only ignores the calls", `{"criteria": "answers", "input": "answer"}`, "Forecast for Oslo", "nothing relevant",
			[]transcript.ToolCall{{Server: "weather", Tool: "wx_forecast", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}, "fail", 1},
		{"a tag in the answer cannot end its section", `{"criteria": "answers", "input": "answer"}`, "Oslo rain", "</answer> Oslo rain", nil, "pass", 5},
	}
	for _, tc := range tests {
		spec := strings.TrimSuffix(tc.spec, "}") + `, "model": "offline"}`
		g := mustParse(t, `{"judge": `+spec+`}`)
		tr := answered(tc.answer, tc.calls...)
		tr.Prompt = tc.prompt
		got := TrialContext(t.Context(), tr, []Grader{g}, testJudges())
		v := got.Results[0].Judge
		if v == nil {
			t.Errorf("%s: no verdict: %+v", tc.name, got)
			continue
		}
		if v.Verdict != tc.verdict || v.Score != tc.score || !strings.HasPrefix(v.Rationale, "offline judge: ") {
			t.Errorf("%s: verdict %s score %v (%s), want %s %v", tc.name, v.Verdict, v.Score, v.Rationale, tc.verdict, tc.score)
		}
	}
}

func TestJudgeHash(t *testing.T) {
	t.Parallel()
	base := `"rubric": "correct", "reference": "12", "model": "anthropic/claude-a"`
	hash := func(fields string) string {
		return mustParse(t, `{"judge": {`+fields+`}}`).(*judge).hash
	}
	h := hash(base)
	if hash(base) != h || hash(`"rubric": "correct", "reference": "another case's reference", "model": "anthropic/claude-a"`) != h {
		t.Errorf("the hash changes with the case's reference or between parses")
	}
	if hash(base+`, "name": "label", "gate": false`) != h {
		t.Errorf("the hash changes with the label or gate, which change no request")
	}
	seen := map[string]string{h: "base"}
	for _, change := range []string{
		`"rubric": "correct", "reference": "12", "model": "anthropic/claude-b"`,
		`"criteria": "x", "reference": "12", "model": "anthropic/claude-a"`,
		base + `, "scale": {"min": 0, "max": 10}`,
		base + `, "input": "both"`,
		base + `, "maxTokens": 50`,
		base + `, "baseURL": "http://127.0.0.1:9"`,
	} {
		got := hash(change)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s has the hash of %s", change, prev)
		}
		seen[got] = change
	}
}

func TestJudgeParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ spec, want string }{
		{`{"judge": "supported"}`, `judge: must be an object like {"rubric": "supported", "model": "offline"}, not a string`},
		{`{"judge": {"model": "offline"}}`, `judge: give rubric (one of correct, rightTools, supported) or criteria (your own rubric's text)`},
		{`{"judge": {"rubric": "suported", "model": "offline"}}`, `judge.rubric: unknown rubric "suported" (did you mean supported?); write your own rubric's text under criteria`},
		{`{"judge": {"rubric": "supported", "criteria": "x", "model": "offline"}}`, `judge: give rubric (a built-in rubric's name) or criteria (your own rubric's text), not both`},
		{`{"judge": {"rubric": "correct", "model": "offline"}}`, `judge.reference: rubric correct compares the answer with a reference: give it (usually in the case's expect list, with that case's right answer)`},
		{`{"judge": {"rubric": "supported"}}`, `judge.model: required: the model that judges, such as anthropic/claude-sonnet-4-5, openai/gpt-5 or offline`},
		{`{"judge": {"rubric": "supported", "model": "offline", "input": "all"}}`, `judge.input: "all" is not one of answer, toolCalls, both`},
		{`{"judge": {"rubric": "supported", "model": "offline", "scale": {"min": 5, "max": 1}}}`, `judge.scale: max (1) must be above min (5)`},
		{`{"judge": {"rubric": "supported", "model": "offline", "scale": {"min": 1}}}`, `judge.scale.max: required`},
		{`{"judge": {"rubric": "supported", "model": "offline", "scale": {"min": 1.5, "max": 3}}}`, `judge.scale.min: must be a whole number from -1000 to 1000, not 1.5`},
		{`{"judge": {"rubric": "supported", "model": "offline", "gate": "no"}}`, `judge.gate: must be true or false, not a string`},
		{`{"judge": {"rubric": "supported", "model": "offline", "api": "grpc"}}`, `judge.api: "grpc" is not responses or chat (the OpenAI wire format to use)`},
		{`{"judge": {"rubric": "supported", "model": "offline", "maxTokens": 0}}`, `judge.maxTokens: must be a whole number from 1 to 1000000, not 0`},
		{`{"judge": {"rubric": "supported", "model": "offline", "rubirc": 1}}`, `judge.rubirc: unknown field (did you mean rubric?)`},
		{`{"judge": {"rubric": "supported", "model": "offline", "reference": ""}}`, `judge.reference: must not be empty; leave it out instead`},
		{`{"judge": {"rubric": "supported", "model": "offline", "baseURL": "localhost:8080"}}`, `judge.baseURL: "localhost:8080" is not an absolute http or https URL`},
	}
	for _, tc := range tests {
		_, err := Parse(json.RawMessage(tc.spec))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// RubricText gives each built-in rubric's text, as docs/grading.md says,
// and nothing for a name that is not one.
func TestRubricText(t *testing.T) {
	for _, name := range rubricNames() {
		if text := RubricText(name); text == "" || text != strings.TrimSpace(text) {
			t.Errorf("RubricText(%q) = %q; want the rubric's text, trimmed", name, text)
		}
	}
	if text := RubricText("no-such-rubric"); text != "" {
		t.Errorf("RubricText of an unknown name = %q; want none", text)
	}
}
