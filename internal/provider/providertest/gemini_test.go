package providertest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/provider/providertest"
)

func geminiScript() providertest.Script {
	return providertest.Script{Conversations: []providertest.Conversation{{Match: "weather", Turns: []providertest.Turn{
		{Text: "Let me check.", ToolCalls: []providertest.Call{{Tool: "get_weather", Arguments: map[string]any{"city": "Paris"}}}, InputTokens: 100, OutputTokens: 20},
		{Text: "It is sunny in Paris."},
	}}}}
}

// geminiBody is a generateContent request as the Gemini CLI sends it: a
// context text and the prompt in the first user content, the tools as
// function declarations, and the history so far.
func geminiBody(history ...string) string {
	contents := append([]string{`{"role":"user","parts":[{"text":"<session_context>ctx</session_context>"},{"text":"What is the weather in Paris?"}]}`}, history...)
	return `{"contents":[` + strings.Join(contents, ",") + `],` +
		`"systemInstruction":{"parts":[{"text":"be brief"}]},` +
		`"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"mcp_weather_get_weather","parametersJsonSchema":{"type":"object"}}]},{"googleSearch":{}}]}`
}

// geminiParts collects the parts of answer chunks: texts joined, calls as
// "name args", the last finish reason and usage.
type geminiTurn struct {
	Text   string
	Calls  []string
	Finish string
	Usage  [3]int64
	Role   string
}

func summarizeGemini(t *testing.T, chunks []map[string]any) geminiTurn {
	t.Helper()
	var s geminiTurn
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		var r struct {
			Candidates []struct {
				Content struct {
					Role  string `json:"role"`
					Parts []struct {
						Text         *string `json:"text"`
						FunctionCall *struct {
							Name string          `json:"name"`
							Args json.RawMessage `json:"args"`
						} `json:"functionCall"`
					} `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
			UsageMetadata *struct {
				Prompt     int64 `json:"promptTokenCount"`
				Candidates int64 `json:"candidatesTokenCount"`
				Total      int64 `json:"totalTokenCount"`
			} `json:"usageMetadata"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Candidates) != 1 {
			t.Fatalf("chunk %s has %d candidates, want 1", b, len(r.Candidates))
		}
		cand := r.Candidates[0]
		s.Role = cand.Content.Role
		for _, p := range cand.Content.Parts {
			if p.Text != nil {
				s.Text += *p.Text
			}
			if p.FunctionCall != nil {
				s.Calls = append(s.Calls, p.FunctionCall.Name+" "+string(p.FunctionCall.Args))
			}
		}
		if cand.FinishReason != "" {
			s.Finish = cand.FinishReason
		}
		if r.UsageMetadata != nil {
			s.Usage = [3]int64{r.UsageMetadata.Prompt, r.UsageMetadata.Candidates, r.UsageMetadata.Total}
		}
	}
	return s
}

func TestGemini(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, geminiScript())
			url := srv.URL + "/v1beta/models/gemini-test:generateContent"
			if stream {
				url = srv.URL + "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
			}
			turn := func(body string) geminiTurn {
				t.Helper()
				a := post(t, url, body)
				if a.status != http.StatusOK {
					t.Fatalf("status %d: %s", a.status, a.body)
				}
				if !stream {
					return summarizeGemini(t, []map[string]any{decode(t, string(a.body))})
				}
				if ct := a.header.Get("Content-Type"); ct != "text/event-stream" {
					t.Errorf("Content-Type = %q", ct)
				}
				evs := events(t, a.body)
				if len(evs) < 2 {
					t.Fatalf("%d events, want the answer in several chunks", len(evs))
				}
				var chunks []map[string]any
				for _, e := range evs {
					if e.name != "" {
						t.Errorf("event named %q; Gemini sends data lines only", e.name)
					}
					chunks = append(chunks, decode(t, e.data))
				}
				return summarizeGemini(t, chunks)
			}
			got := turn(geminiBody())
			want := geminiTurn{
				Text: "Let me check.", Calls: []string{`mcp_weather_get_weather {"city":"Paris"}`},
				Finish: "STOP", Usage: [3]int64{100, 20, 120}, Role: "model",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("first turn (-want +got):\n%s", diff)
			}
			got = turn(geminiBody(
				`{"role":"model","parts":[{"text":"Let me check."},{"functionCall":{"name":"mcp_weather_get_weather","args":{"city":"Paris"}}}]}`,
				`{"role":"user","parts":[{"functionResponse":{"name":"mcp_weather_get_weather","response":{"output":"sunny"}}}]}`,
			))
			want = geminiTurn{Text: "It is sunny in Paris.", Finish: "STOP", Usage: [3]int64{10, 5, 15}, Role: "model"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("second turn (-want +got):\n%s", diff)
			}

			var recs []providertest.Request
			for _, r := range srv.Requests() {
				r.Header, r.Body = nil, nil
				recs = append(recs, r)
			}
			base := providertest.Request{
				Format: "gemini", Path: "/v1beta/models/gemini-test:generateContent", Model: "gemini-test", Stream: stream,
				Tools:         []string{"read_file", "mcp_weather_get_weather", "googleSearch"},
				FirstUserText: "<session_context>ctx</session_context>\nWhat is the weather in Paris?", Status: http.StatusOK,
			}
			if stream {
				base.Path, base.Query = "/v1beta/models/gemini-test:streamGenerateContent", "alt=sse"
			}
			next := base
			next.Turn = 1
			if diff := cmp.Diff([]providertest.Request{base, next}, recs); diff != "" {
				t.Errorf("Requests() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGeminiErrors checks the error shape of faults and bad requests, and
// that other paths under /v1beta are not served.
func TestGeminiErrors(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Script{Faults: []providertest.Fault{{Status: 500, Times: 1, Message: "boom"}, {Status: 429, Times: 1}}})
	url := srv.URL + "/v1beta/models/g:streamGenerateContent?alt=sse"
	check := func(a rawAnswer, status int, googleStatus, message string) {
		t.Helper()
		if a.status != status {
			t.Fatalf("status = %d, want %d: %s", a.status, status, a.body)
		}
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if err := json.Unmarshal(a.body, &e); err != nil {
			t.Fatalf("error body %s: %v", a.body, err)
		}
		if e.Error.Code != status || e.Error.Status != googleStatus || !strings.Contains(e.Error.Message, message) {
			t.Errorf("error = %+v, want code %d status %s message with %q", e.Error, status, googleStatus, message)
		}
	}
	a := post(t, url, geminiBody())
	check(a, 500, "INTERNAL", "boom")
	if a.header.Get("retry-after") != "0" {
		t.Errorf("retry-after = %q", a.header.Get("retry-after"))
	}
	check(post(t, url, geminiBody()), 429, "RESOURCE_EXHAUSTED", "scripted fault 2")
	check(post(t, url, `{"contents":[]}`), 400, "INVALID_ARGUMENT", "contents")
	check(post(t, url, `not json`), 400, "INVALID_ARGUMENT", "not a generateContent request")

	// With the faults used up, the zero script answers.
	a = post(t, srv.URL+"/v1beta/models/g:generateContent", geminiBody())
	if got := summarizeGemini(t, []map[string]any{decode(t, string(a.body))}); got.Text != "(script exhausted)" {
		t.Errorf("answer = %+v", got)
	}

	for _, path := range []string{"/v1beta/models/g:countTokens", "/v1beta/models/:generateContent", "/v1beta/models"} {
		if a := post(t, srv.URL+path, geminiBody()); a.status != http.StatusNotFound {
			t.Errorf("POST %s = %d, want 404", path, a.status)
		}
	}
	var formats []string
	for _, r := range srv.Requests() {
		formats = append(formats, r.Format)
	}
	if want := []string{"gemini", "gemini", "gemini", "gemini", "gemini", "", "", ""}; !slices.Equal(formats, want) {
		t.Errorf("formats = %q, want %q", formats, want)
	}
}
