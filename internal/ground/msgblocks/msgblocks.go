// Package msgblocks reads the content of messages in the Anthropic
// Messages format, as records of conversations keep them: Claude Code's
// stream, a desktop app's own record, a request to the fake provider. A
// message's content is a string or a list of blocks (text, tool_use,
// tool_result, …).
package msgblocks

import (
	"encoding/json"
	"strings"
)

// Block is one content block; only the fields of its type are set.
type Block struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// Content is a message's content: a string decodes as one text block.
type Content []Block

// UnmarshalJSON reads a string or a list of blocks.
func (c *Content) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*c = Content{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// ResultText is a tool_result's content as text: a string, or its text
// blocks joined by newlines (other blocks are named by their type, as
// "[image]"); content that is neither is given as it is.
func ResultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var c Content
	if json.Unmarshal(raw, &c) != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range c {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else if b.Type != "" {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}
