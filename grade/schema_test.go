package grade

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestSchemaAgreesWithParse checks that the schema accepts exactly the specs
// Parse accepts, apart from what only Parse can check (regular expressions).
func TestSchemaAgreesWithParse(t *testing.T) {
	t.Parallel()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatalf("Schema() is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("grader.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("grader.json")
	if err != nil {
		t.Fatalf("compiling Schema(): %v", err)
	}
	tests := []struct {
		spec        string
		schemaValid bool
	}{
		{`{"answerContains": "x"}`, true},
		{`{"answerContains": {"text": "x", "ignoreCase": true}}`, true},
		{`{"answerContains": {"text": "x"}}`, true},
		{`{"answerContains": ""}`, false},
		{`{"answerContains": {"ignoreCase": true}}`, false},
		{`{"answerContains": {"text": "x", "other": 1}}`, false},
		{`{"answerMatches": "\\d+"}`, true},
		{`{"answerMatches": "(abc"}`, true}, // only Parse compiles the expression
		{`{"answerMatches": 1}`, false},
		{`{"toolCalled": "a"}`, true},
		{`{"toolCalled": {"tool": "a", "server": "s", "arguments": {"k": [1]}}}`, true},
		{`{"toolCalled": {"tool": "a", "arguments": []}}`, false},
		{`{"toolCalled": {"server": "s"}}`, false},
		{`{"toolCalled": {"tool": "a", "server": ""}}`, false},
		{`{"toolNotCalled": "a"}`, true},
		{`{"toolNotCalled": {"tool": "a", "server": "s"}}`, true},
		{`{"toolNotCalled": {"tool": "a", "arguments": {}}}`, false},
		{`{"maxToolCalls": 0}`, true},
		{`{"maxToolCalls": 4.0}`, true},
		{`{"maxToolCalls": 2.5}`, false},
		{`{"maxToolCalls": -1}`, false},
		{`{"maxToolCalls": 1e12}`, false},
		{`{}`, false},
		{`{"toolCalled": "a", "maxToolCalls": 1}`, false},
		{`{"tooCalled": "a"}`, false},
		{`"toolCalled"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(tt.spec)))
			if err != nil {
				t.Fatal(err)
			}
			schemaErr := sch.Validate(inst)
			if got := schemaErr == nil; got != tt.schemaValid {
				t.Errorf("schema accepts %s = %v, want %v (%v)", tt.spec, got, tt.schemaValid, schemaErr)
			}
			_, parseErr := Parse(json.RawMessage(tt.spec))
			if tt.schemaValid && tt.spec != `{"answerMatches": "(abc"}` && parseErr != nil {
				t.Errorf("schema accepts %s but Parse = %v", tt.spec, parseErr)
			}
			if !tt.schemaValid && parseErr == nil {
				t.Errorf("schema rejects %s but Parse accepts it", tt.spec)
			}
		})
	}
}

func TestSchemaIsACopy(t *testing.T) {
	t.Parallel()
	a := Schema()
	a[0] = 'x'
	if b := Schema(); b[0] != '{' {
		t.Errorf("Schema() changed after its result was written to: starts with %q", b[0])
	}
}
