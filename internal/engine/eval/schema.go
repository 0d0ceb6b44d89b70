package eval

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaID is the $id of the config's JSON Schema.
const SchemaID = "https://github.com/mst-eval/mst/schema/eval.json"

// graderSchemaID is given to the grader schema when it has no $id of its
// own, so that references inside it resolve against it once embedded.
const graderSchemaID = "https://github.com/mst-eval/mst/schema/grader.json"

//go:embed schema.json
var schemaJSON []byte

// Catalog is what a config is checked against beyond its own shape: the
// clients and the graders this build of MST knows. The CLI builds one from
// the client registry and package grade; tests use a fake. Load calls it
// only from the goroutine that called Load. A Catalog that is also a
// ClientCatalog, SourceCatalog or PluginCatalog has Load check more.
type Catalog interface {
	// ClientOptions returns the JSON Schema of the named client's
	// clientOptions. It must be an object schema; additionalProperties
	// false makes every unknown option an error. An unknown client is an
	// error that lists the known ones.
	ClientOptions(client string) (schema json.RawMessage, err error)
	// GraderSchema returns the JSON Schema of one grader entry, for editors
	// and for the items of the config's graders list.
	GraderSchema() json.RawMessage
	// ParseGrader checks one grader entry; its error says what is wrong
	// inside the entry.
	ParseGrader(spec json.RawMessage) error
	// ProviderNames lists the model providers this build knows
	// ("anthropic", "offline"), the keys limits.providers may use.
	ProviderNames() []string
}

// Schema returns the JSON Schema (draft 2020-12) of a config file, indented,
// with the catalog's grader schema as the items of graders. It panics when
// the catalog's grader schema is not JSON, which is a broken build.
func Schema(cat Catalog) []byte {
	b, err := schemaBytes(cat)
	if err != nil {
		panic(err)
	}
	return b
}

// graderSlot is the placeholder in schema.json that the grader schema
// replaces.
const graderSlot = `{"$comment": "the grader schema goes here"}`

// providersSlot is the placeholder in schema.json that the properties of
// limits.providers, one per catalog provider, replace.
const providersSlot = `{"$comment": "the providers go here"}`

// providerLimits returns the properties of limits.providers: one integer
// of at least 1 per provider, in the catalog's order.
func providerLimits(cat Catalog) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range cat.ProviderNames() {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		d, _ := json.Marshal(fmt.Sprintf("Trials in flight at once on %s models.", name))
		fmt.Fprintf(&b, `%s: {"description": %s, "type": "integer", "minimum": 1}`, k, d)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// splice replaces slot in doc with compact, what it names, indented as the
// slot's line.
func splice(doc []byte, slot, what string, compact []byte) ([]byte, error) {
	at := bytes.Index(doc, []byte(slot))
	if at < 0 {
		return nil, fmt.Errorf("eval: schema.json has no place for %s", what)
	}
	lineStart := bytes.LastIndexByte(doc[:at], '\n') + 1
	indent := doc[lineStart:at]
	indent = indent[:len(indent)-len(bytes.TrimLeft(indent, " "))]
	var out bytes.Buffer
	out.Write(doc[:at])
	if err := json.Indent(&out, compact, string(indent), "  "); err != nil {
		return nil, fmt.Errorf("eval: indenting %s: %w", what, err)
	}
	out.Write(doc[at+len(slot):])
	return out.Bytes(), nil
}

// schemaBytes splices the grader schema and the provider limits into
// schema.json's text, keeping the order the keys are written in there.
func schemaBytes(cat Catalog) ([]byte, error) {
	grader := map[string]any{"type": "object"}
	if raw := cat.GraderSchema(); len(bytes.TrimSpace(raw)) > 0 {
		v, err := decodeJSONValue(raw)
		if err != nil {
			return nil, fmt.Errorf("eval: the grader schema is not JSON: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("eval: the grader schema is not a JSON object")
		}
		grader = m
	}
	if _, has := grader["$id"]; !has {
		// Its own $id makes it a schema resource, so that references
		// inside it ("#/$defs/…") resolve against it once embedded.
		grader["$id"] = graderSchemaID
	}
	compact, err := json.Marshal(grader)
	if err != nil {
		return nil, fmt.Errorf("eval: encoding the grader schema: %w", err)
	}
	doc, err := splice(schemaJSON, graderSlot, "the grader schema", compact)
	if err != nil {
		return nil, err
	}
	return splice(doc, providersSlot, "the provider limits", providerLimits(cat))
}

// buildSchema returns the config's schema as JSON values (numbers as
// json.Number), ready for the validator.
func buildSchema(cat Catalog) (any, error) {
	b, err := schemaBytes(cat)
	if err != nil {
		return nil, err
	}
	doc, err := decodeJSONValue(b)
	if err != nil {
		return nil, fmt.Errorf("eval: reading the config schema: %w", err)
	}
	return doc, nil
}

// decodeJSONValue decodes b keeping numbers exact.
func decodeJSONValue(b []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// compiledSchema is a compiled schema plus its source, so that validation
// errors can be explained with the schema's own annotations.
type compiledSchema struct {
	schema *jsonschema.Schema
	// resources maps the $id of the schema and of every embedded resource
	// to its JSON value.
	resources map[string]any
}

// compile compiles doc, registering it under url.
func compile(url string, doc any) (*compiledSchema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	cs := &compiledSchema{schema: s, resources: map[string]any{url: doc}}
	cs.index(doc)
	return cs, nil
}

// index records every embedded resource (a subschema with an absolute $id).
func (cs *compiledSchema) index(v any) {
	switch v := v.(type) {
	case map[string]any:
		if id, ok := v["$id"].(string); ok && strings.Contains(id, "://") {
			cs.resources[strings.TrimSuffix(id, "#")] = v
		}
		for _, x := range v {
			cs.index(x)
		}
	case []any:
		for _, x := range v {
			cs.index(x)
		}
	}
}

// at returns the schema object at an absolute schema location such as
// "https://…/eval.json#/$defs/server", or nil when it cannot be found.
func (cs *compiledSchema) at(loc string) map[string]any {
	base, frag, _ := strings.Cut(loc, "#")
	cur, ok := cs.resources[base]
	if !ok {
		return nil
	}
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch v := cur.(type) {
			case map[string]any:
				cur = v[tok]
			case []any:
				var i int
				if _, err := fmt.Sscan(tok, &i); err != nil || i < 0 || i >= len(v) {
					return nil
				}
				cur = v[i]
			default:
				return nil
			}
		}
	}
	m, _ := cur.(map[string]any)
	return m
}
