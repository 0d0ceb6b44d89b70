package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// exhausted is the answer text once a conversation has no more turns.
const exhausted = "(script exhausted)"

// Default usage of a Turn that states none.
const (
	defaultInputTokens  = 10
	defaultOutputTokens = 5
)

// compiledTurn is a Turn with its arguments already marshalled.
type compiledTurn struct {
	text          string
	calls         []compiledCall
	input, output int64
	refusal       string
}

type compiledCall struct {
	tool      string
	arguments string // JSON
}

func compileTurns(turns []Turn) ([]compiledTurn, error) {
	out := make([]compiledTurn, len(turns))
	for i, t := range turns {
		ct := compiledTurn{text: t.Text, input: t.InputTokens, output: t.OutputTokens, refusal: t.Refusal}
		if ct.input == 0 {
			ct.input = defaultInputTokens
		}
		if ct.output == 0 {
			ct.output = defaultOutputTokens
		}
		for j, c := range t.ToolCalls {
			args, err := marshalArguments(c.Arguments)
			if err != nil {
				return nil, fmt.Errorf("turn %d, call %d (%s): arguments: %w", i, j, c.Tool, err)
			}
			ct.calls = append(ct.calls, compiledCall{tool: c.Tool, arguments: args})
		}
		out[i] = ct
	}
	return out, nil
}

func marshalArguments(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "{}", nil
	case json.RawMessage:
		if !json.Valid(v) {
			return "", fmt.Errorf("json.RawMessage %q is not valid JSON", v)
		}
		return string(v), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// answer is one model turn, resolved against the request's tools.
type answer struct {
	text          string
	calls         []answerCall
	input, output int64
	// refusal is Turn.Refusal: when set, the answer is a refusal.
	refusal string
}

// answerCall is a tool call as the model sends it.
type answerCall struct {
	name      string
	namespace string // Responses namespace tools only
	arguments string // JSON
}

// offeredTool is a tool offered in a request.
type offeredTool struct {
	recorded  string // as in Request.Tools
	name      string // as the model names it in a call; "" if it has none
	namespace string // Responses namespace tools only
	// description and schema are what the offline model reads.
	description string
	schema      json.RawMessage
}

// answerFor picks the scripted turn for a request, or the offline model's.
func (s *Server) answerFor(p parsed) answer {
	if s.offline {
		return offlineAnswer(p)
	}
	turns := s.conversation(p.firstUserText)
	if len(turns) == 0 {
		return answer{text: exhausted, input: defaultInputTokens, output: defaultOutputTokens}
	}
	if p.turn >= len(turns) {
		last := turns[len(turns)-1]
		a := answer{text: last.text, input: last.input, output: last.output}
		if a.text == "" {
			a.text = exhausted
		}
		return a
	}
	t := turns[p.turn]
	a := answer{text: t.text, input: t.input, output: t.output}
	if t.refusal != "" {
		return answer{refusal: t.refusal, input: t.input, output: t.output}
	}
	for _, c := range t.calls {
		name, ns := resolveTool(c.tool, p.tools)
		a.calls = append(a.calls, answerCall{name: name, namespace: ns, arguments: c.arguments})
	}
	return a
}

func (s *Server) conversation(firstUserText string) []compiledTurn {
	if i := s.conversationIndex(firstUserText); i >= 0 {
		return s.turns[i]
	}
	return nil
}

// conversationIndex is the index of the Conversation that answers a
// conversation whose first user text is firstUserText, or -1.
func (s *Server) conversationIndex(firstUserText string) int {
	for i, m := range s.matches {
		if strings.Contains(firstUserText, m) {
			return i
		}
	}
	return -1
}

// resolveTool finds the offered tool a scripted call means (see Call.Tool)
// and returns the name and namespace the model must answer with.
func resolveTool(tool string, offered []offeredTool) (name, namespace string) {
	stages := []func(t offeredTool) bool{
		func(t offeredTool) bool {
			return t.name == tool || t.recorded == tool ||
				(t.namespace != "" && t.namespace+"__"+t.name == tool)
		},
		func(t offeredTool) bool {
			return hasAnySuffix(t.recorded, "__"+tool, "."+tool)
		},
		func(t offeredTool) bool {
			return hasAnySuffix(t.recorded, "_"+tool)
		},
		func(t offeredTool) bool {
			want := normalize(tool)
			return want != "" && (normalize(t.recorded) == want || normalize(tail(t.recorded)) == want)
		},
	}
	for _, matches := range stages {
		for _, t := range offered {
			if t.name != "" && matches(t) {
				return t.name, t.namespace
			}
		}
	}
	return tool, ""
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

// normalize lowercases s and keeps only its runes in [a-z0-9].
func normalize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// tail is the part of a tool name after its last "__" or ".".
func tail(name string) string {
	i := 0
	if j := strings.LastIndex(name, "__"); j >= 0 {
		i = j + 2
	}
	if j := strings.LastIndex(name, "."); j >= 0 && j+1 > i {
		i = j + 1
	}
	return name[i:]
}

// split cuts s into two pieces at a rune boundary near its middle, so that
// streamed deltas must be reassembled. A string too short to cut is one
// piece.
func split(s string) []string {
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		mid = len(s) / 2
		for mid < len(s) && !utf8.RuneStart(s[mid]) {
			mid++
		}
	}
	if mid == 0 || mid == len(s) {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}

// sse writes server-sent events, flushing after each one. After the first
// write error it writes nothing more: the client has gone.
type sse struct {
	w   http.ResponseWriter
	err error
}

func newSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

// send writes one event; an empty name writes a data line only.
func (s *sse) send(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("providertest: marshalling an event: %v", err))
	}
	s.raw(name, b)
}

func (s *sse) raw(name string, data []byte) {
	if s.err != nil {
		return
	}
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, s.err = io.WriteString(s.w, b.String()); s.err != nil {
		return
	}
	s.err = http.NewResponseController(s.w).Flush()
}
