package desktop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/ground/msgblocks"
	"github.com/mst-eval/mst/transcript"
)

// record is an app's own record of one conversation, as MST read it.
type record struct {
	id       string
	messages []transcript.Message
	calls    []transcript.ToolCall
	answer   string
	usage    transcript.Usage
	raw      map[string]any
}

// native finds the app's record of the conversation that began with
// prompt at or after sent, in the profile's native folder: the newest
// record written since then whose first user text is the prompt.
func (s *Session) native(sent time.Time, prompt string) (record, bool) {
	if s.prof.NativeDir == "" {
		return record{}, false
	}
	dir := expand(s.prof.NativeDir, s.home)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return record{}, false
	}
	var best record
	var bestTime time.Time
	found := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil || info.ModTime().Before(sent.Add(-time.Second)) || (found && !info.ModTime().After(bestTime)) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		rec, first, ok := s.parseAnthropic(data)
		if !ok || strings.TrimSpace(first) != strings.TrimSpace(prompt) {
			continue
		}
		if rec.id == "" {
			rec.id = strings.TrimSuffix(e.Name(), ".json")
		}
		best, bestTime, found = rec, info.ModTime(), true
	}
	return best, found
}

// parseAnthropic reads a record in the anthropic-messages format: the
// conversation as the Anthropic Messages API takes it, with usage.
func (s *Session) parseAnthropic(data []byte) (rec record, firstUser string, ok bool) {
	var doc struct {
		ID       string `json:"id"`
		Messages []struct {
			Role    string            `json:"role"`
			Content msgblocks.Content `json:"content"`
		} `json:"messages"`
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &doc) != nil || len(doc.Messages) == 0 {
		return record{}, "", false
	}
	json.Unmarshal(data, &rec.raw)
	rec.id = doc.ID
	rec.usage = transcript.Usage{InputTokens: doc.Usage.InputTokens, OutputTokens: doc.Usage.OutputTokens}
	calls := map[string]int{} // tool_use id → index in rec.calls
	for i, m := range doc.Messages {
		msg := transcript.Message{Role: m.Role}
		var texts []string
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				server, tool := s.front.toolServer(b.Name)
				args := b.Input
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				calls[b.ID] = len(rec.calls)
				rec.calls = append(rec.calls, transcript.ToolCall{ID: b.ID, Server: server, Tool: tool, Arguments: args})
				msg.ToolCalls = append(msg.ToolCalls, b.ID)
			case "tool_result":
				result := msgblocks.ResultText(b.Content)
				if j, ok := calls[b.ToolUseID]; ok {
					rec.calls[j].Result, rec.calls[j].IsError = result, b.IsError
				}
				rec.messages = append(rec.messages, transcript.Message{Role: "tool", ToolCall: b.ToolUseID, Text: result})
			}
		}
		msg.Text = strings.Join(texts, "\n")
		if msg.Text == "" && len(msg.ToolCalls) == 0 {
			continue // a user turn of tool results only
		}
		if i == 0 && m.Role == "user" {
			firstUser = msg.Text
		}
		rec.messages = append(rec.messages, msg)
		if m.Role == "assistant" && msg.Text != "" {
			rec.answer = msg.Text
		}
	}
	return rec, firstUser, true
}
