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
  "description": "A deterministic grader: an object with exactly one key, the grader's name.",
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
    }
  ]
}`
