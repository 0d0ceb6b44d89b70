package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/engine/report"
)

var updateSchema = flag.Bool("update", false, "rewrite schema.json from the Go types, keeping its descriptions")

// TestSchemaUpToDate fails when schema.json does not describe the JSON
// that Report, RunComparison and GradeSetComparison marshal to: a field added, removed or
// retyped in Go must be in the schema too. With -update it rewrites the
// file from the Go types, keeping every description it had; describe the
// new fields by hand afterwards.
func TestSchemaUpToDate(t *testing.T) {
	old := map[string]any{}
	if err := json.Unmarshal(report.Schema(), &old); err != nil {
		t.Fatalf("schema.json: %v", err)
	}
	g := schemaGen{defs: map[string]any{}}
	g.of(reflect.TypeFor[report.Report]())
	g.of(reflect.TypeFor[report.RunComparison]())
	g.of(reflect.TypeFor[report.GradeSetComparison]())
	setConst(g.defs, "Report", report.Kind, report.Version)
	setConst(g.defs, "RunComparison", report.CompareKind, report.CompareVersion)
	setConst(g.defs, "GradeSetComparison", report.GradesCompareKind, report.GradesCompareVersion)
	oldDefs, _ := old["$defs"].(map[string]any)
	for name, d := range g.defs {
		od, _ := oldDefs[name].(map[string]any)
		nd := d.(map[string]any)
		if desc, ok := od["description"]; ok {
			nd["description"] = desc
		}
		oprops, _ := od["properties"].(map[string]any)
		for p, ps := range nd["properties"].(map[string]any) {
			if op, ok := oprops[p].(map[string]any); ok {
				if desc, ok := op["description"]; ok {
					ps.(map[string]any)["description"] = desc
				}
			}
		}
	}
	want := map[string]any{}
	for k, v := range old {
		want[k] = v
	}
	want["$defs"] = g.defs
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(buf.Bytes(), report.Schema()) {
		return
	}
	if *updateSchema {
		if err := os.WriteFile("schema.json", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("internal/engine/report/schema.json does not match the Go types of Report, RunComparison and GradeSetComparison; run go test ./report -run TestSchemaUpToDate -update, then describe any new field in it")
}

func setConst(defs map[string]any, name, kind string, version int) {
	props := defs[name].(map[string]any)["properties"].(map[string]any)
	props["kind"].(map[string]any)["const"] = kind
	props["version"].(map[string]any)["const"] = version
}

// schemaGen makes the JSON Schema of Go types as encoding/json marshals
// them: a struct is a $defs entry that allows no other property and
// requires every field without omitempty or omitzero; a pointer may be
// null; a slice may be null only when it is a pointer.
type schemaGen struct{ defs map[string]any }

func (g schemaGen) of(t reflect.Type) map[string]any {
	switch {
	case t == reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	case t == reflect.TypeFor[json.RawMessage]():
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := g.of(t.Elem())
		if ref, ok := s["$ref"]; ok {
			return map[string]any{"oneOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
		}
		s["type"] = []any{s["type"], "null"}
		return s
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Float64, reflect.Float32:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := t.Name()
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // against recursion
			props := map[string]any{}
			var req []any
			var walk func(t reflect.Type)
			walk = func(t reflect.Type) {
				for i := range t.NumField() {
					f := t.Field(i)
					if !f.IsExported() {
						continue
					}
					tag := f.Tag.Get("json")
					n, opts, _ := strings.Cut(tag, ",")
					if n == "-" {
						continue
					}
					if f.Anonymous && n == "" {
						walk(f.Type)
						continue
					}
					if n == "" {
						n = f.Name
					}
					props[n] = g.of(f.Type)
					if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
						req = append(req, n)
					}
				}
			}
			walk(t)
			g.defs[name] = map[string]any{"type": "object", "additionalProperties": false, "required": req, "properties": props}
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	panic("schemaGen: no schema for " + t.String())
}
