package offline_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/provider"
)

func newModel(t testing.TB) provider.Provider {
	t.Helper()
	p, err := offline.New("offline")
	if err != nil {
		t.Fatalf("New(offline) = %v", err)
	}
	return p
}

func userPrompt(text string) []provider.Message {
	return []provider.Message{{Role: provider.User, Text: text}}
}

func tool(name, description, schema string) provider.Tool {
	if schema == "" {
		schema = `{"type":"object"}`
	}
	return provider.Tool{Name: name, Description: description, InputSchema: json.RawMessage(schema)}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ref     string
		wantErr bool
	}{
		{"offline", false},
		{"offline/demo", false},
		{"offline/a/b", false},
		{"offline/", true},
		{"", true},
		{"anthropic/claude-sonnet-4-5", true},
		{"offlinex", true},
	}
	for _, tt := range tests {
		_, err := offline.New(tt.ref)
		if (err != nil) != tt.wantErr {
			t.Errorf("New(%q) error = %v, want error %v", tt.ref, err, tt.wantErr)
		}
	}
}

func TestChoosesTool(t *testing.T) {
	t.Parallel()
	weather := []provider.Tool{
		tool("wx_now", "Current conditions in a city: temperature, wind and humidity right now.", ""),
		tool("wx_forecast", "Forecast for the next days: rain, snow, highs and lows.", ""),
		tool("wx_alerts", "Active storm and flood warnings for a region.", ""),
	}
	tests := []struct {
		name   string
		tools  []provider.Tool
		prompt string
		want   string // the tool called, "" for a direct answer
	}{
		{"description decides", weather, "Will it rain in Oslo over the next 3 days?", "wx_forecast"},
		{"stemmed words match", weather, "Are there any storm warnings for the North Sea?", "wx_alerts"},
		{"most shared words win", weather, "What's the temperature in Lisbon right now?", "wx_now"},
		{"name counts", []provider.Tool{tool("a", "", ""), tool("getCityList", "", "")}, "Which cities are there?", "getCityList"},
		{
			"tie goes to the first offered",
			[]provider.Tool{tool("one", "Weather data.", ""), tool("two", "Weather report.", "")},
			"Weather in Oslo",
			"one",
		},
		{
			"tie order follows the request",
			[]provider.Tool{tool("two", "Weather report.", ""), tool("one", "Weather data.", "")},
			"Weather in Oslo",
			"two",
		},
		{"no shared word", weather, "Tell me a joke about penguins.", ""},
		{"stop words do not count", []provider.Tool{tool("about", "Tell me what it is.", "")}, "Tell me what it is about.", ""},
		{"no tools offered", nil, "Will it rain in Oslo?", ""},
		{"empty prompt", weather, "  ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := newModel(t).Complete(t.Context(), provider.Request{Model: "offline", Messages: userPrompt(tt.prompt), Tools: tt.tools})
			if err != nil {
				t.Fatalf("Complete(%q) = %v", tt.prompt, err)
			}
			if tt.want == "" {
				want := provider.Response{Text: offline.NoToolAnswer, StopReason: offline.StopEndTurn}
				if diff := cmp.Diff(want, resp, cmp.FilterPath(isUsage, cmp.Ignore())); diff != "" {
					t.Errorf("Complete(%q) mismatch (-want +got):\n%s", tt.prompt, diff)
				}
				return
			}
			if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != tt.want || resp.Text != "" || resp.StopReason != offline.StopToolUse {
				t.Errorf("Complete(%q) = %+v, want one call of %s with stop reason %s", tt.prompt, resp, tt.want, offline.StopToolUse)
			}
		})
	}
}

func isUsage(p cmp.Path) bool { return p.Last().String() == ".Usage" }

func TestArguments(t *testing.T) {
	t.Parallel()
	const units = `{"type":"object","properties":{
		"value":{"type":"number"},
		"from":{"type":"string","enum":["celsius","fahrenheit","kelvin"]},
		"to":{"type":"string","enum":["celsius","fahrenheit","kelvin"]}},
		"required":["value","from","to"]}`
	tests := []struct {
		name   string
		schema string
		prompt string
		want   string // the arguments, exactly
	}{
		{
			"capitalised word",
			`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
			"What's the temperature in Lisbon right now?",
			`{"city":"Lisbon"}`,
		},
		{
			"run of capitalised words",
			`{"type":"object","properties":{"region":{"type":"string"}},"required":["region"]}`,
			"Are there any storm warnings for the North Sea region?",
			`{"region":"North Sea"}`,
		},
		{
			"first word of a sentence is skipped",
			`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
			"Oslo is cold. Is Bergen colder?",
			`{"city":"Bergen"}`,
		},
		{
			"quotes come first, each value once",
			`{"type":"object","properties":{"query":{"type":"string"},"place":{"type":"string"}},"required":["query","place"]}`,
			`Find 'blue whales' near Oslo, or "orcas"`,
			`{"query":"blue whales","place":"orcas"}`,
		},
		{
			"then capitalised words",
			`{"type":"object","properties":{"origin":{"type":"string"},"destination":{"type":"string"}},"required":["origin","destination"]}`,
			`Trains from "Oslo" to Bergen`,
			`{"origin":"Oslo","destination":"Bergen"}`,
		},
		{
			"last content word for a required string",
			`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
			"what is the weather in paris?",
			`{"city":"paris"}`,
		},
		{
			"optional string needs a real candidate",
			`{"type":"object","properties":{"city":{"type":"string"},"note":{"type":"string"}},"required":["city"]}`,
			"weather in Paris",
			`{"city":"Paris"}`,
		},
		{
			"numbers in order, integers truncated",
			`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"hours":{"type":"integer"}},"required":["city"]}`,
			"Forecast for Oslo: 2.5 days, then 12 hours",
			`{"city":"Oslo","days":2,"hours":12}`,
		},
		{
			"optional number left out",
			`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`,
			"Will it snow in Reykjavik?",
			`{"city":"Reykjavik"}`,
		},
		{
			"required number with none given",
			`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
			"how many?",
			`{"n":0}`,
		},
		{"enum values in prompt order", units, "Convert 70 Fahrenheit to celsius", `{"value":70,"from":"fahrenheit","to":"celsius"}`},
		{"enum values used once", units, "Convert 30 degrees celsius to fahrenheit", `{"value":30,"from":"celsius","to":"fahrenheit"}`},
		{"enum not in prompt", units, "Convert 300", `{"value":300,"from":"celsius","to":"celsius"}`},
		{
			"optional enum left out",
			`{"type":"object","properties":{"unit":{"enum":["metric","imperial"]}}}`,
			"Weather in Oslo",
			`{}`,
		},
		{
			"booleans, objects, arrays and nullable types",
			`{"type":"object","properties":{
				"verbose":{"type":"boolean"},"quiet":{"type":"boolean"},
				"opts":{"type":"object"},"tags":{"type":"array"},
				"name":{"type":["null","string"]}},
				"required":["verbose","opts","tags","name"]}`,
			"Describe Oslo",
			`{"verbose":false,"opts":{},"tags":[],"name":"Oslo"}`,
		},
		{"no properties", `{"type":"object"}`, "List Oslo", `{}`},
		{"unreadable schema", `"not a schema"`, "List Oslo", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The tool's description is the prompt itself, so that it is chosen.
			req := provider.Request{Messages: userPrompt(tt.prompt), Tools: []provider.Tool{tool("t", tt.prompt, tt.schema)}}
			resp, err := newModel(t).Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete(%q) = %v", tt.prompt, err)
			}
			if len(resp.ToolCalls) != 1 {
				t.Fatalf("Complete(%q) = %+v, want one tool call", tt.prompt, resp)
			}
			if got := string(resp.ToolCalls[0].Arguments); got != tt.want {
				t.Errorf("Complete(%q) arguments = %s, want %s", tt.prompt, got, tt.want)
			}
		})
	}
}

func TestAnswersFromResults(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2500)
	tests := []struct {
		name    string
		results []provider.ToolResult
		want    string
	}{
		{
			"contents joined",
			[]provider.ToolResult{{CallID: "1", Content: "Oslo: rain, 9°C"}, {CallID: "2", Content: "Lisbon: sun, 22°C"}},
			"Oslo: rain, 9°C\nLisbon: sun, 22°C",
		},
		{
			"an error wins",
			[]provider.ToolResult{{CallID: "1", Content: "fine"}, {CallID: "2", Content: `unknown city "Atlantis"`, IsError: true}},
			`The tool reported an error: unknown city "Atlantis"`,
		},
		{"no content", []provider.ToolResult{{CallID: "1"}}, offline.EmptyAnswer},
		{"cut to 2000 runes", []provider.ToolResult{{CallID: "1", Content: long}}, long[:2*2000]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msgs := []provider.Message{
				{Role: provider.User, Text: "Will it rain in Oslo tomorrow?"},
				{Role: provider.Assistant, ToolCalls: []provider.ToolCall{{ID: "1", Name: "wx_forecast", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
				{Role: provider.User, ToolResults: tt.results},
			}
			req := provider.Request{Messages: msgs, Tools: []provider.Tool{tool("wx_forecast", "Rain forecast.", "")}}
			resp, err := newModel(t).Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete = %v", err)
			}
			want := provider.Response{Text: tt.want, StopReason: offline.StopEndTurn}
			if diff := cmp.Diff(want, resp, cmp.FilterPath(isUsage, cmp.Ignore())); diff != "" {
				t.Errorf("Complete after results mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	req := provider.Request{
		System:   "Be brief.",                                                                  // 2 words
		Messages: userPrompt("Will it rain in Oslo tomorrow?"),                                 // 6 words
		Tools:    []provider.Tool{tool("wx_forecast", "Rain forecast.", `{"type": "object"}`)}, // 1 + 2 + 2 words
	}
	resp, err := newModel(t).Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	// 13 words in: 13/0.75 = 17.33. Out: the name and {} are 2 words: 2.67.
	want := provider.Usage{InputTokens: 17, OutputTokens: 3}
	if diff := cmp.Diff(want, resp.Usage); diff != "" {
		t.Errorf("Complete usage mismatch (-want +got):\n%s", diff)
	}
}

func TestDeterministicAndConcurrent(t *testing.T) {
	t.Parallel()
	p := newModel(t)
	req := benchRequest()
	want, err := p.Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	var wg sync.WaitGroup
	results := make([]provider.Response, 64)
	for i := range results {
		wg.Go(func() {
			results[i], _ = p.Complete(t.Context(), req)
		})
	}
	wg.Wait()
	for i, got := range results {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Complete #%d differs from the first (-first +got):\n%s", i, diff)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := newModel(t).Complete(ctx, benchRequest())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Complete(cancelled) = %v, want context.Canceled", err)
	}
}

func benchRequest() provider.Request {
	return provider.Request{
		Model:    "offline",
		System:   "You are a helpful assistant.",
		Messages: userPrompt("Convert 30 degrees celsius to fahrenheit, please."),
		Tools: []provider.Tool{
			tool("wx_alerts", "Active weather warnings for a region: storms, floods, heat.", `{"type":"object","properties":{"region":{"type":"string"}},"required":["region"]}`),
			tool("wx_cities", "Lists the cities this server knows.", `{"type":"object"}`),
			tool("wx_convert", "Convert a temperature between celsius, fahrenheit and kelvin.", `{"type":"object","properties":{"from":{"type":"string","enum":["celsius","fahrenheit","kelvin"]},"to":{"type":"string","enum":["celsius","fahrenheit","kelvin"]},"value":{"type":"number"}},"required":["from","to","value"]}`),
			tool("wx_forecast", "Daily forecast for a city: sky, highs and lows, chance of rain.", `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`),
			tool("wx_now", "Current conditions in a city: temperature, humidity, wind.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		},
	}
}

func BenchmarkComplete(b *testing.B) {
	p := newModel(b)
	req := benchRequest()
	for b.Loop() {
		if _, err := p.Complete(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}
