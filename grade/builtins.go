package grade

import (
	"encoding/json"
	"sync"
)

// Builtins returns MST's own graders as definitions, registered in every
// Registry as a plugin's graders are, so the grader suite
// (grade/gradertest) checks them as it checks a plugin's. Each call
// returns new definitions.
func Builtins() []*Definition {
	parsers := map[string]func(json.RawMessage) (Grader, error){
		keyAnswerContains: parseAnswerContains,
		keyAnswerMatches:  parseAnswerMatches,
		keyToolCalled:     parseToolCalled,
		keyToolNotCalled:  parseToolNotCalled,
		keyMaxToolCalls:   parseMaxToolCalls,
		keyJudge:          parseJudge,
	}
	var out []*Definition
	for _, name := range graderNames() {
		part := builtinSchemas()[name]
		out = append(out, &Definition{Name: name, Description: part.description, Options: part.options, New: parsers[name]})
	}
	return out
}

// builtinSchema is one built-in grader's part of Schema.
type builtinSchema struct {
	description string
	options     json.RawMessage
}

// builtinSchemas reads each built-in grader's description and options
// schema out of Schema, the one place they are written.
var builtinSchemas = sync.OnceValue(func() map[string]builtinSchema {
	var doc struct {
		OneOf []struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"oneOf"`
	}
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		panic("grade: the graders' schema is not JSON: " + err.Error())
	}
	out := map[string]builtinSchema{}
	for _, alt := range doc.OneOf {
		for name, opts := range alt.Properties {
			var d struct {
				Description string `json:"description"`
			}
			if err := json.Unmarshal(opts, &d); err != nil {
				panic("grade: the schema of " + name + " is not an object: " + err.Error())
			}
			out[name] = builtinSchema{description: d.Description, options: opts}
		}
	}
	for _, name := range graderNames() {
		if _, ok := out[name]; !ok {
			panic("grade: the graders' schema has no " + name)
		}
	}
	return out
})
