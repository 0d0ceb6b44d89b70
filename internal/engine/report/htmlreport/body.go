package htmlreport

import (
	"encoding/json"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// body is what the page holds of one trial: its transcript, less what the
// element's id already says (run, case, variant, trial) and less what it
// would repeat (a tool message that only repeats its call's result, the
// client's result of a call when it is the proxy's, the answer when it is
// the last assistant message, the prompt when it is the first user
// message), with its grade. The page's script reads these names.
type body struct {
	Status   string `json:"status"`
	Cause    string `json:"cause,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Client   string `json:"client,omitempty"`
	Version  string `json:"clientVersion,omitempty"`
	Model    string `json:"model,omitempty"`
	Shard    int    `json:"shard"`
	Prompt   string `json:"prompt,omitempty"`
	Answer   string `json:"answer,omitempty"`
	Messages []msg  `json:"messages"`
	Calls    []call `json:"toolCalls"`
	// ClientCalls is the client's own account when a proxy recorded Calls.
	ClientCalls   []call                   `json:"clientToolCalls,omitempty"`
	Discrepancies []transcript.Discrepancy `json:"discrepancies,omitempty"`
	Servers       []transcript.ServerInfo  `json:"servers,omitempty"`
	Usage         transcript.Usage         `json:"usage"`
	Started       *time.Time               `json:"started,omitempty"`
	Ended         *time.Time               `json:"ended,omitempty"`
	DurationMs    float64                  `json:"durationMs"`
	SetupMs       float64                  `json:"setupMs,omitempty"`
	Environment   transcript.Environment   `json:"environment"`
	Telemetry     json.RawMessage          `json:"clientTelemetry,omitempty"`
	// (A trial's grade is a document of its own, "g-ID" beside the
	// transcript's "t-ID", which the page's script puts in "grade".)
}

type msg struct {
	Role      string   `json:"role"`
	Text      string   `json:"text,omitempty"`
	ToolCalls []string `json:"toolCalls,omitempty"`
	ToolCall  string   `json:"toolCall,omitempty"`
}

type call struct {
	ID         string          `json:"id"`
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Result     string          `json:"result,omitempty"`
	SameResult bool            `json:"sameResult,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMs float64         `json:"durationMs"`
	OfferedAs  string          `json:"offeredAs,omitempty"`
	Simulated  bool            `json:"simulated,omitempty"`
	Injected   string          `json:"injected,omitempty"`
	Evidence   string          `json:"evidence,omitempty"`
}

type gradeBody struct {
	Graded bool   `json:"graded"`
	Passed bool   `json:"passed"`
	Failed string `json:"failed,omitempty"`
	// Errored says why the trial could not be graded (a grader that
	// decides it gave no verdict).
	Errored string `json:"errored,omitempty"`
	// Results are the graders' results; the page marks an advisory one
	// (Advisory) that did not pass apart from a failure.
	Results []grade.Result `json:"results,omitempty"`
	// Stale is true when the grade is of an earlier transcript of the
	// trial than the one shown.
	Stale bool `json:"stale,omitempty"`
}

func newBody(t *transcript.Transcript) body {
	b := body{
		Status: t.Outcome.Status, Cause: t.Outcome.Cause, Detail: clip(t.Outcome.Detail),
		Client: t.Client.Name, Version: t.Client.Version, Model: t.Model, Shard: t.Shard,
		Discrepancies: t.Discrepancies, Servers: t.Servers, Usage: t.Usage,
		DurationMs: t.Timing.DurationMs, SetupMs: t.Timing.SetupMs, Environment: t.Environment,
		Messages: make([]msg, 0, len(t.Messages)), Calls: make([]call, 0, len(t.ToolCalls)),
	}
	if !t.Timing.Started.IsZero() {
		b.Started = &t.Timing.Started
	}
	if !t.Timing.Ended.IsZero() {
		b.Ended = &t.Timing.Ended
	}
	results := map[string]string{}
	for _, c := range t.ToolCalls {
		b.Calls = append(b.Calls, newCall(c))
		results[c.ID] = c.Result
	}
	for _, c := range t.ClientToolCalls {
		cc := newCall(c)
		if r, ok := results[c.ID]; ok && r == c.Result {
			cc.Result, cc.SameResult = "", true
		}
		b.ClientCalls = append(b.ClientCalls, cc)
		if _, ok := results[c.ID]; !ok {
			results[c.ID] = c.Result
		}
	}
	firstUser, lastAssistant := "", ""
	for i, m := range t.Messages {
		mm := msg{Role: m.Role, Text: clip(m.Text), ToolCalls: m.ToolCalls, ToolCall: m.ToolCall}
		if r, ok := results[m.ToolCall]; ok && m.ToolCall != "" && r == m.Text {
			mm.Text = ""
		}
		if i == 0 && m.Role == "user" {
			firstUser = m.Text
		}
		if m.Role == "assistant" && m.Text != "" {
			lastAssistant = m.Text
		}
		b.Messages = append(b.Messages, mm)
	}
	if len(t.Messages) == 0 || t.Prompt != firstUser {
		b.Prompt = clip(t.Prompt)
	}
	if t.Answer != lastAssistant {
		b.Answer = clip(t.Answer)
	}
	if len(t.ClientTelemetry) > 0 {
		if raw, err := json.Marshal(t.ClientTelemetry); err == nil {
			b.Telemetry = clipRaw(raw)
		}
	}
	return b
}

// newGradeBody is what the page shows of a trial's grade g, beside the
// transcript that ended at ended (Unix nanoseconds, endedAt): stale when g
// is of another transcript of the trial.
func newGradeBody(g *grade.TrialGrade, ended int64) *gradeBody {
	gb := &gradeBody{Graded: g.Graded, Passed: g.Graded && g.Passed, Failed: clip(g.Failed), Errored: clip(g.Errored), Results: g.Results}
	gb.Stale = !g.Trial.Ended.IsZero() && endedAt(g.Trial.Ended) != ended
	for i, r := range gb.Results {
		gb.Results[i].Detail = clip(r.Detail)
		gb.Results[i].Error = clip(r.Error)
	}
	return gb
}

func newCall(c transcript.ToolCall) call {
	return call{
		ID: c.ID, Server: c.Server, Tool: c.Tool, Arguments: clipRaw(c.Arguments),
		Result: clip(c.Result), IsError: c.IsError, Error: clip(c.Error), DurationMs: c.DurationMs,
		OfferedAs: c.OfferedAs, Simulated: c.Simulated, Injected: c.Injected, Evidence: c.Evidence,
	}
}
