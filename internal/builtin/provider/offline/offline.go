package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/provider"
)

// Texts the offline model answers with.
const (
	// NoToolAnswer is the answer when no offered tool matches the prompt.
	NoToolAnswer = "I don't have a tool for that."
	// ErrorAnswerPrefix starts the answer when a tool result is an error.
	ErrorAnswerPrefix = "The tool reported an error: "
	// EmptyAnswer is the answer when the tool results have no content.
	EmptyAnswer = "The tool returned no content."
	// MaxAnswerRunes is the length an answer is cut to.
	MaxAnswerRunes = 2000
)

// Stop reasons of a Response.
const (
	StopToolUse = "tool_use"
	StopEndTurn = "end_turn"
)

// model is the offline provider. It holds only its name.
type model struct {
	name string
}

// New returns the offline model. The model reference must be "offline" or
// "offline/<label>".
func New(ref string) (provider.Provider, error) {
	if ref != "offline" && (!strings.HasPrefix(ref, "offline/") || ref == "offline/") {
		return nil, fmt.Errorf("offline: model %q: want \"offline\" or \"offline/<label>\"", ref)
	}
	return model{name: ref}, nil
}

// Complete answers one turn as the package documentation describes. It
// fails only when ctx is done.
func (m model) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	if err := ctx.Err(); err != nil {
		return provider.Response{}, fmt.Errorf("offline: %w", err)
	}
	var resp provider.Response
	if results := lastResults(req.Messages); results != nil {
		resp = provider.Response{Text: answerFrom(results), StopReason: StopEndTurn}
	} else if isJudgeRequest(req.System) {
		resp = judge(req)
	} else {
		resp = choose(req)
	}
	resp.Usage = provider.Usage{InputTokens: inputTokens(req), OutputTokens: outputTokens(resp)}
	return resp, nil
}

// lastResults returns the tool results of the last message when it is a
// user message that carries any, and nil otherwise.
func lastResults(msgs []provider.Message) []provider.ToolResult {
	if len(msgs) == 0 {
		return nil
	}
	last := msgs[len(msgs)-1]
	if last.Role != provider.User || len(last.ToolResults) == 0 {
		return nil
	}
	return last.ToolResults
}

// answerFrom writes the final answer from tool results.
func answerFrom(results []provider.ToolResult) string {
	for _, r := range results {
		if r.IsError {
			return truncate(ErrorAnswerPrefix + r.Content)
		}
	}
	parts := make([]string, len(results))
	for i, r := range results {
		parts[i] = r.Content
	}
	text := strings.Join(parts, "\n")
	if strings.TrimSpace(text) == "" {
		return EmptyAnswer
	}
	return truncate(text)
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) <= MaxAnswerRunes {
		return s
	}
	return string([]rune(s)[:MaxAnswerRunes])
}

// choose reads the prompt and calls the best-matching tool, or answers
// NoToolAnswer when no tool matches.
func choose(req provider.Request) provider.Response {
	text := promptText(req.Messages)
	words := contentWords(text, nil)
	best, bestScore := -1, 0
	var toolWords []string
	for i, t := range req.Tools {
		toolWords = contentWords(t.Name, toolWords[:0])
		toolWords = contentWords(t.Description, toolWords)
		if s := score(words, toolWords); s > bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return provider.Response{Text: NoToolAnswer, StopReason: StopEndTurn}
	}
	tool := req.Tools[best]
	args := json.RawMessage("{}")
	if props, err := readSchema(tool.InputSchema); err == nil {
		args = arguments(props, scanPrompt(text))
	}
	call := provider.ToolCall{
		ID:        fmt.Sprintf("offline_call_%d", countAssistant(req.Messages)+1),
		Name:      tool.Name,
		Arguments: args,
	}
	return provider.Response{ToolCalls: []provider.ToolCall{call}, StopReason: StopToolUse}
}

// promptText is the text of the last user message that has text.
func promptText(msgs []provider.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.User && strings.TrimSpace(msgs[i].Text) != "" {
			return msgs[i].Text
		}
	}
	return ""
}

// score counts the distinct prompt words that are among the tool's words.
func score(prompt, tool []string) int {
	n := 0
	for i, w := range prompt {
		if indexOf(prompt[:i], w) >= 0 {
			continue // counted already
		}
		if indexOf(tool, w) >= 0 {
			n++
		}
	}
	return n
}

func indexOf(words []string, w string) int {
	for i, x := range words {
		if x == w {
			return i
		}
	}
	return -1
}

func countAssistant(msgs []provider.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == provider.Assistant {
			n++
		}
	}
	return n
}

// inputTokens estimates the tokens of everything the request sends.
func inputTokens(req provider.Request) int64 {
	w := countWords(req.System)
	for _, m := range req.Messages {
		w += countWords(m.Text)
		for _, c := range m.ToolCalls {
			w += countWords(c.Name) + countWords(string(c.Arguments))
		}
		for _, r := range m.ToolResults {
			w += countWords(r.Content)
		}
	}
	for _, t := range req.Tools {
		w += countWords(t.Name) + countWords(t.Description) + countWords(string(t.InputSchema))
	}
	return tokens(w)
}

// outputTokens estimates the tokens of the response.
func outputTokens(resp provider.Response) int64 {
	w := countWords(resp.Text)
	for _, c := range resp.ToolCalls {
		w += countWords(c.Name) + countWords(string(c.Arguments))
	}
	return tokens(w)
}

// countWords counts the runs of non-space runes in s.
func countWords(s string) int {
	n, inWord := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			n++
		}
		inWord = !space
	}
	return n
}

// tokens is words / 0.75, rounded to the nearest integer.
func tokens(words int) int64 {
	return int64((4*words + 1) / 3)
}

// Definition is the offline model's registry entry: "offline" or
// "offline/<label>", no key, no network. Options are ignored.
func Definition() *provider.Definition {
	return &provider.Definition{
		Name:        "offline",
		Description: "MST's built-in deterministic model for demos and tests: no network, no key.",
		New: func(label string, _ provider.Options) (provider.Provider, error) {
			if label == "" {
				return New("offline")
			}
			return New("offline/" + label)
		},
	}
}
