package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// CheckOptions checks client options given outside the config file (a
// case's clientOptions, say) against a client's options schema. It returns
// one message per problem, each starting with the option's path:
// "timeot: unknown option (did you mean timeout?)".
func CheckOptions(schema, options json.RawMessage) ([]string, error) {
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("reading the options schema: %w", err)
	}
	cs, err := compile("mst:client-options", sdoc)
	if err != nil {
		return nil, fmt.Errorf("compiling the options schema: %w", err)
	}
	val, err := jsonschema.UnmarshalJSON(bytes.NewReader(options))
	if err != nil {
		return nil, fmt.Errorf("reading the options: %w", err)
	}
	verr := cs.schema.Validate(val)
	if verr == nil {
		return nil, nil
	}
	doc := newDocument()
	doc.root = val
	x := &explainer{cs: cs, doc: doc, noun: "option"}
	var out []string
	for _, p := range x.explain(verr) {
		path := formatPath(val, p.tokens)
		if path == "" {
			out = append(out, p.msg)
			continue
		}
		out = append(out, path+": "+p.msg)
	}
	sort.Strings(out)
	return out, nil
}
