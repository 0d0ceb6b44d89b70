package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Gemini API paths: POST /v1beta/models/{model}:streamGenerateContent
// (?alt=sse) and POST /v1beta/models/{model}:generateContent. The model is
// in the path, not the body.
const (
	geminiPrefix       = "/v1beta/models/"
	geminiStreamMethod = ":streamGenerateContent"
	geminiMethod       = ":generateContent"
)

// geminiFormat returns the Gemini format for a request path, with the model
// and whether it streams taken from the path, or false when path is not a
// Gemini generate path.
func geminiFormat(path string) (*format, bool) {
	rest, ok := strings.CutPrefix(path, geminiPrefix)
	if !ok {
		return nil, false
	}
	var model string
	var stream bool
	switch {
	case strings.HasSuffix(rest, geminiStreamMethod):
		model, stream = strings.TrimSuffix(rest, geminiStreamMethod), true
	case strings.HasSuffix(rest, geminiMethod):
		model = strings.TrimSuffix(rest, geminiMethod)
	default:
		return nil, false
	}
	if model == "" || strings.Contains(model, "/") {
		return nil, false
	}
	return &format{
		name:   FormatGemini,
		parse:  func(body []byte) (parsed, error) { return parseGemini(body, model, stream) },
		answer: answerGemini,
		fail:   failGemini,
	}, true
}

type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	Thought          bool            `json:"thought,omitempty"`
	FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
	FunctionResponse json.RawMessage `json:"functionResponse,omitempty"`
}

type geminiCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiRequest struct {
	Contents []geminiContent              `json:"contents"`
	Tools    []map[string]json.RawMessage `json:"tools"`
}

func parseGemini(body []byte, model string, stream bool) (parsed, error) {
	p := parsed{model: model, stream: stream}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return p, fmt.Errorf("providertest: request body is not a generateContent request: %w", err)
	}
	for _, t := range req.Tools {
		decls, ok := t["functionDeclarations"]
		if !ok {
			// A built-in tool ({"googleSearch": {}}) is recorded by its kind.
			for k := range t {
				p.tools = append(p.tools, offeredTool{recorded: k})
			}
			continue
		}
		var fns []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		}
		if err := json.Unmarshal(decls, &fns); err != nil {
			return p, fmt.Errorf("providertest: tools[].functionDeclarations: %w", err)
		}
		for _, fn := range fns {
			schema := fn.ParametersJSONSchema
			if len(schema) == 0 {
				schema = fn.Parameters
			}
			p.tools = append(p.tools, offeredTool{recorded: fn.Name, name: fn.Name, description: fn.Description, schema: schema})
		}
	}
	p.history = geminiHistory(req.Contents)
	var texts []string
	for _, c := range req.Contents {
		if c.Role == "model" {
			p.turn++
			continue
		}
		if c.Role == "user" && p.turn == 0 {
			for _, part := range c.Parts {
				if !part.Thought {
					texts = append(texts, part.Text)
				}
			}
		}
	}
	p.firstUserText = joinTexts(texts)
	if len(req.Contents) == 0 {
		return p, errors.New("* GenerateContentRequest.contents: contents is not specified")
	}
	return p, nil
}

type geminiUsage struct {
	PromptTokenCount     int64 `json:"promptTokenCount"`
	CandidatesTokenCount int64 `json:"candidatesTokenCount"`
	TotalTokenCount      int64 `json:"totalTokenCount"`
}

type geminiCandidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata *geminiUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

// answerGemini writes a as one GenerateContentResponse, or, streamed, as
// server-sent events: the text in two pieces, then the function calls,
// then a last chunk with finishReason STOP and the usage.
func answerGemini(w http.ResponseWriter, p parsed, a answer, ids idSource) {
	usage := &geminiUsage{PromptTokenCount: a.input, CandidatesTokenCount: a.output, TotalTokenCount: a.input + a.output}
	var calls []geminiPart
	for _, c := range a.calls {
		calls = append(calls, geminiPart{FunctionCall: &geminiCall{Name: c.name, Args: json.RawMessage(c.arguments)}})
	}
	id := ids("gemini_resp_")
	if !p.stream {
		var parts []geminiPart
		if a.text != "" {
			parts = append(parts, geminiPart{Text: a.text})
		}
		parts = append(parts, calls...)
		writeJSON(w, http.StatusOK, geminiResponse{
			Candidates:    []geminiCandidate{{Content: geminiContent{Role: "model", Parts: parts}, FinishReason: "STOP"}},
			UsageMetadata: usage, ModelVersion: p.model, ResponseID: id,
		})
		return
	}
	ev := newSSE(w)
	send := func(parts []geminiPart, finish string, u *geminiUsage) {
		ev.send("", geminiResponse{
			Candidates:    []geminiCandidate{{Content: geminiContent{Role: "model", Parts: parts}, FinishReason: finish}},
			UsageMetadata: u, ModelVersion: p.model, ResponseID: id,
		})
	}
	pieces := split(a.text)
	if a.text == "" {
		pieces = nil
	}
	for _, piece := range pieces {
		send([]geminiPart{{Text: piece}}, "", nil)
	}
	if len(calls) > 0 {
		send(calls, "", nil)
	}
	// The last chunk carries the finish reason and the usage, with an
	// empty text part as the real API sends.
	send([]geminiPart{{Text: ""}}, "STOP", usage)
}

// failGemini writes an error in Google's shape.
func failGemini(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"code": status, "message": message, "status": googleStatus(status)},
	})
}

// googleStatus is the canonical status name Google's APIs give an HTTP
// status.
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusMethodNotAllowed:
		return "UNIMPLEMENTED"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "UNKNOWN"
}
