package eval

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestSchema(t *testing.T) {
	t.Parallel()
	b := Schema(fakeCatalog{})
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("Schema() is not JSON: %v", err)
	}
	root := doc.(map[string]any)
	for key, want := range map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$id":     SchemaID,
		"title":   "MST eval config",
	} {
		if root[key] != want {
			t.Errorf("Schema()[%q] = %v, want %v", key, root[key], want)
		}
	}
	items := root["properties"].(map[string]any)["graders"].(map[string]any)["items"].(map[string]any)
	if items["$id"] != graderSchemaID || items["description"] != "A grader: one key, its name." {
		t.Errorf("Schema() graders.items = %v, want the catalog's grader schema with an $id", items)
	}

	// Every property, at any depth, explains itself.
	var missing []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name, p := range props {
					ps, _ := p.(map[string]any)
					if _, ok := ps["description"]; !ok {
						if _, ref := ps["$ref"]; !ref {
							missing = append(missing, path+"/properties/"+name)
						}
					}
				}
			}
			for k, x := range v {
				walk(path+"/"+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"/[]", x)
			}
		}
	}
	walk("#", root)
	if len(missing) > 0 {
		t.Errorf("Schema() properties without a description: %s", strings.Join(missing, ", "))
	}

	// It compiles, and accepts a full config and rejects a wrong one.
	cs, err := compile(SchemaID, doc)
	if err != nil {
		t.Fatalf("compiling Schema(): %v", err)
	}
	full, err := jsonschema.UnmarshalJSON(strings.NewReader(fullJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.schema.Validate(full); err != nil {
		t.Errorf("Schema() rejects the full example: %v", err)
	}
	var bad map[string]any
	if err := json.Unmarshal([]byte(`{"name": "x", "datasets": ["a"], "servers": {"s": {}}, "variants": {"v": {"model": "offline"}}, "graders": [{"answerContains": ""}]}`), &bad); err != nil {
		t.Fatal(err)
	}
	if err := cs.schema.Validate(bad); err == nil {
		t.Errorf("Schema() accepts an empty answerContains; the grader schema's $ref did not resolve")
	}
}

func TestSchemaDescribesConfig(t *testing.T) {
	t.Parallel()
	// Every field of Config that a file sets has a property in the schema.
	var root map[string]any
	if err := json.Unmarshal(Schema(fakeCatalog{}), &root); err != nil {
		t.Fatal(err)
	}
	props := root["properties"].(map[string]any)
	var got []string
	for _, name := range []string{"name", "description", "datasets", "servers", "variants", "trials", "graders", "limits", "results"} {
		if _, ok := props[name]; ok {
			got = append(got, name)
		}
	}
	want := []string{"name", "description", "datasets", "servers", "variants", "trials", "graders", "limits", "results"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Schema() top-level properties mismatch (-want +got):\n%s", diff)
	}
}

// brokenGraders is a catalog whose grader schema is not JSON.
type brokenGraders struct{ fakeCatalog }

func (brokenGraders) GraderSchema() json.RawMessage { return json.RawMessage(`{"oneOf": [`) }

func TestBrokenGraderSchema(t *testing.T) {
	t.Parallel()
	got := loadErrorsWith(t, brokenGraders{}, "eval.yaml", head+"variants: {v: {model: offline}}\n")
	want := []string{"eval.yaml: eval: the grader schema is not JSON: unexpected EOF"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load with a broken grader schema mismatch (-want +got):\n%s", diff)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Schema(broken grader schema) did not panic")
		}
	}()
	Schema(brokenGraders{})
}

// otherProviders is a catalog of a build with other model providers.
type otherProviders struct{ fakeCatalog }

func (otherProviders) ProviderNames() []string { return []string{"acme", "offline"} }

// TestProviderLimitsFromCatalog: the keys of limits.providers are the
// catalog's providers, not a list in schema.json.
func TestProviderLimitsFromCatalog(t *testing.T) {
	t.Parallel()
	got := loadErrorsWith(t, otherProviders{}, "eval.yaml", head+"variants: {v: {model: offline}}\nlimits:\n  providers: {acme: 2, anthropic: 1}\n")
	want := []string{"eval.yaml:7:24: limits.providers.anthropic: unknown provider (known: acme, offline)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(limits.providers with anthropic, catalog of acme and offline) errors (-want +got):\n%s", diff)
	}
	var root struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Properties map[string]struct {
					Description string `json:"description"`
				} `json:"properties"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema(otherProviders{}), &root); err != nil {
		t.Fatal(err)
	}
	limits := root.Defs["limits"].Properties["providers"].Properties
	if len(limits) != 2 || limits["acme"].Description != "Trials in flight at once on acme models." {
		t.Errorf("Schema(acme, offline) limits.providers properties = %+v, want acme and offline", limits)
	}
}
