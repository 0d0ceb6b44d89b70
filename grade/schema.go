package grade

import "encoding/json"

// Schema returns the JSON Schema (draft 2020-12) of one grader spec. It has
// no "$schema" or "$id", so it can be embedded as a subschema, such as the
// items of the config's graders list. Each call returns a fresh copy.
//
// The schema checks shapes only; Parse also compiles regular expressions.
func Schema() json.RawMessage {
	return json.RawMessage(schema)
}

const schema = `{
  "title": "Grader",
  "description": "A grader: an object with exactly one key, the grader's name. All but judge are deterministic.",
  "type": "object",
  "oneOf": [
    {
      "type": "object",
      "required": ["answerContains"],
      "additionalProperties": false,
      "properties": {
        "answerContains": {
          "description": "Passes when the final answer contains the text.",
          "oneOf": [
            {"type": "string", "minLength": 1},
            {
              "type": "object",
              "required": ["text"],
              "additionalProperties": false,
              "properties": {
                "text": {"type": "string", "minLength": 1, "description": "The text the answer must contain."},
                "ignoreCase": {"type": "boolean", "description": "Compare ignoring upper and lower case.", "default": false}
              }
            }
          ]
        }
      }
    },
    {
      "type": "object",
      "required": ["answerMatches"],
      "additionalProperties": false,
      "properties": {
        "answerMatches": {
          "description": "Passes when the final answer matches the regular expression (Go RE2 syntax; unanchored).",
          "type": "string",
          "minLength": 1
        }
      }
    },
    {
      "type": "object",
      "required": ["toolCalled"],
      "additionalProperties": false,
      "properties": {
        "toolCalled": {
          "description": "Passes when some tool call has this tool (and server), with arguments containing the given ones.",
          "oneOf": [
            {"type": "string", "minLength": 1},
            {
              "type": "object",
              "required": ["tool"],
              "additionalProperties": false,
              "properties": {
                "tool": {"type": "string", "minLength": 1, "description": "The tool name."},
                "server": {"type": "string", "minLength": 1, "description": "The server the call must go to; any server when left out."},
                "arguments": {"type": "object", "description": "Arguments the call must contain: objects match by subset, numbers by value, everything else exactly."}
              }
            }
          ]
        }
      }
    },
    {
      "type": "object",
      "required": ["toolNotCalled"],
      "additionalProperties": false,
      "properties": {
        "toolNotCalled": {
          "description": "Passes when no tool call has this tool (on this server, if given).",
          "oneOf": [
            {"type": "string", "minLength": 1},
            {
              "type": "object",
              "required": ["tool"],
              "additionalProperties": false,
              "properties": {
                "tool": {"type": "string", "minLength": 1, "description": "The tool name."},
                "server": {"type": "string", "minLength": 1, "description": "Only calls to this server count; any server when left out."}
              }
            }
          ]
        }
      }
    },
    {
      "type": "object",
      "required": ["maxToolCalls"],
      "additionalProperties": false,
      "properties": {
        "maxToolCalls": {
          "description": "Passes when the trial made at most this many tool calls, failed calls included.",
          "type": "integer",
          "minimum": 0,
          "maximum": 2147483647
        }
      }
    },
    {
      "type": "object",
      "required": ["judge"],
      "additionalProperties": false,
      "properties": {
        "judge": {
          "description": "An LLM judge: a model grades the trial against a rubric and gives a verdict (pass or fail), a score on the scale and its rationale. A judge that errors gives an errored grade, never a fail. docs/grading.md describes the built-in rubrics.",
          "type": "object",
          "required": ["model"],
          "additionalProperties": false,
          "oneOf": [{"required": ["rubric"]}, {"required": ["criteria"]}],
          "properties": {
            "rubric": {"type": "string", "enum": ["correct", "rightTools", "supported"], "description": "A built-in rubric: correct (the answer agrees with the reference), rightTools (the right tools with the right arguments), supported (no claim the tool results do not back)."},
            "criteria": {"type": "string", "minLength": 1, "description": "Your own rubric, in words, in place of a built-in one."},
            "reference": {"type": "string", "minLength": 1, "description": "What the judge compares with: the right answer (required by rubric correct), or the calls expected. Usually given in a case's expect list."},
            "model": {"type": "string", "minLength": 1, "description": "The judge model, PROVIDER/MODEL: anthropic/claude-sonnet-4-5, openai/gpt-5, or offline (MST's deterministic model, for demos and tests)."},
            "input": {"type": "string", "enum": ["answer", "toolCalls", "both"], "description": "What the judge reads besides the task: the final answer, the tool calls as the servers got them (with results), or both. The default depends on the rubric: answer for correct, toolCalls for rightTools, both otherwise."},
            "scale": {
              "type": "object",
              "required": ["min", "max"],
              "additionalProperties": false,
              "description": "The range of the score, both ends included.",
              "default": {"min": 1, "max": 5},
              "properties": {
                "min": {"type": "integer", "minimum": -1000, "maximum": 1000},
                "max": {"type": "integer", "minimum": -1000, "maximum": 1000}
              }
            },
            "gate": {"type": "boolean", "default": true, "description": "Whether the verdict decides if the trial passes; false records and reports the score only."},
            "name": {"type": "string", "minLength": 1, "description": "A label for the judge in reports, in place of the rubric's name."},
            "baseURL": {"type": "string", "minLength": 1, "description": "The provider's API address, for a gateway or an OpenAI-compatible server."},
            "api": {"type": "string", "enum": ["responses", "chat"], "description": "For OpenAI models: the wire format (default responses)."},
            "apiKeyEnv": {"type": "string", "minLength": 1, "description": "The variable (in the secrets file or MST's environment) that holds the judge's key, in place of the provider's own (ANTHROPIC_API_KEY, OPENAI_API_KEY)."},
            "maxTokens": {"type": "integer", "minimum": 1, "maximum": 1000000, "default": 1024, "description": "The most tokens the judge's reply may take."}
          }
        }
      }
    }
  ]
}`
