package eval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// fakeCatalog stands in for the client registry and package grade.
type fakeCatalog struct{}

var fakeClients = map[string]string{
	"api": `{
		"type": "object",
		"additionalProperties": false,
		"properties": {
			"timeout": {"type": "string", "description": "Time per trial, as a duration."},
			"maxActions": {"type": "integer", "minimum": 1, "description": "Tool calls per trial."}
		}
	}`,
	"codex-cli": `{"type": "object", "additionalProperties": false, "properties": {"timeout": {"type": "string"}}}`,
	"codex-app": `{"type": "object", "additionalProperties": false, "properties": {"maxActions": {"type": "integer"}}}`,
	"chatgpt":   `{"type": "object", "additionalProperties": false, "properties": {"maxActions": {"type": "integer"}}}`,
	"cowork": `{
		"type": "object",
		"additionalProperties": false,
		"required": ["appVersion"],
		"properties": {
			"appVersion": {"type": "string"},
			"reasoningEffort": {"enum": ["low", "medium", "high"]}
		}
	}`,
	"bare": ``,
	// rich uses many JSON Schema keywords, to exercise how their failures
	// are worded.
	"rich": `{
		"type": "object",
		"additionalProperties": false,
		"properties": {
			"mode": {"const": "fast"},
			"label": {"type": "string", "maxLength": 3, "minLength": 2},
			"ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
			"step": {"type": "number", "multipleOf": 0.5, "maximum": 10},
			"tags": {"type": "array", "minItems": 2, "maxItems": 3, "uniqueItems": true},
			"old": false,
			"not": {"not": {"type": "string"}},
			"pair": {"type": "object", "minProperties": 2, "maxProperties": 2, "dependentRequired": {"a": ["b"]}},
			"either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
			"both": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
			"shape": {"oneOf": [
				{"type": "object", "required": ["x"], "properties": {"x": {"type": "integer"}}},
				{"type": "object", "required": ["y"], "properties": {"y": {"type": "integer"}}}
			]}
		}
	}`,
}

func (fakeCatalog) ClientOptions(client string) (json.RawMessage, error) {
	s, ok := fakeClients[client]
	if !ok {
		var names []string
		for n := range fakeClients {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("unknown client %q (known: %s)", client, strings.Join(names, ", "))
	}
	return json.RawMessage(s), nil
}

// GraderSchema refers to its own $defs, as a real one may, to show that it
// keeps working once embedded in the config's schema.
func (fakeCatalog) ProviderNames() []string {
	return []string{"anthropic", "google", "offline", "openai"}
}

func (fakeCatalog) GraderSchema() json.RawMessage {
	return json.RawMessage(`{
		"description": "A grader: one key, its name.",
		"type": "object",
		"$defs": {"text": {"type": "string", "minLength": 1}},
		"oneOf": [
			{"type": "object", "required": ["answerContains"], "additionalProperties": false,
			 "properties": {"answerContains": {"$ref": "#/$defs/text", "description": "Text the answer holds."}}},
			{"type": "object", "required": ["toolCalled"], "additionalProperties": false,
			 "properties": {"toolCalled": {"$ref": "#/$defs/text", "description": "A tool that was called."}}}
		]
	}`)
}

func (fakeCatalog) ParseGrader(spec json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(spec, &m); err != nil {
		return fmt.Errorf("a grader must be an object with one key")
	}
	if len(m) != 1 {
		return fmt.Errorf("a grader has exactly one key, found %d", len(m))
	}
	for k, v := range m {
		if k != "answerContains" && k != "toolCalled" {
			return fmt.Errorf("unknown grader %q", k)
		}
		if s, ok := v.(string); !ok || s == "" {
			return fmt.Errorf("%s: must be a non-empty string", k)
		}
	}
	return nil
}
