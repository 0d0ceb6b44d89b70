package client_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mst-eval/mst/client"
)

func TestOptionsSchemaShape(t *testing.T) {
	t.Parallel()
	raw := client.OptionsSchema(client.SharedOptions{
		Timeout:         "180s",
		MaxActions:      &client.MaxActions{Action: "tool calls", Default: 20},
		ReasoningEffort: &client.ReasoningEffort{DefaultDescription: "the provider's default"},
		AppVersion:      true,
	}, client.Option{
		Name:               "baseURL",
		Schema:             map[string]any{"type": "string"},
		Description:        "Where the API is.",
		DefaultDescription: "the public API",
	})
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("OptionsSchema is not JSON: %v\n%s", err, raw)
	}
	if got["type"] != "object" || got["additionalProperties"] != false {
		t.Errorf("OptionsSchema: type %v, additionalProperties %v; want object, false", got["type"], got["additionalProperties"])
	}
	props := got["properties"].(map[string]any)
	prop := func(name string) map[string]any {
		p, ok := props[name].(map[string]any)
		if !ok {
			t.Fatalf("OptionsSchema has no property %s: %s", name, raw)
		}
		return p
	}
	if d := prop("timeout")["default"]; d != "180s" {
		t.Errorf("timeout default = %v, want 180s", d)
	}
	if d := prop("maxActions")["default"]; d != float64(20) {
		t.Errorf("maxActions default = %v, want 20", d)
	}
	if m := prop("maxActions")["minimum"]; m != float64(1) {
		t.Errorf("maxActions minimum = %v, want 1", m)
	}
	if d := prop("reasoningEffort")["x-defaultDescription"]; d != "the provider's default" {
		t.Errorf("reasoningEffort x-defaultDescription = %v, want the provider's default", d)
	}
	if d := prop("baseURL")["x-defaultDescription"]; d != "the public API" {
		t.Errorf("baseURL x-defaultDescription = %v, want the public API", d)
	}
	if _, ok := prop("appVersion")["type"]; !ok {
		t.Errorf("appVersion has no type: %v", prop("appVersion"))
	}
	for name := range props {
		p := prop(name)
		if s, _ := p["description"].(string); s == "" {
			t.Errorf("option %s has no description", name)
		}
		_, lit := p["default"]
		_, dyn := p["x-defaultDescription"]
		if lit == dyn {
			t.Errorf("option %s: default %v, x-defaultDescription %v; want exactly one", name, lit, dyn)
		}
	}
}

func TestOptionsSchemaOnlyTheSharedOptionsAsked(t *testing.T) {
	t.Parallel()
	opts, err := client.DescribeOptions(client.OptionsSchema(client.SharedOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 1 || opts[0].Name != "timeout" || opts[0].DefaultDescription != "none" || opts[0].Default != nil {
		t.Errorf("OptionsSchema(no shared options) = %+v, want only timeout with default none", opts)
	}
}

func TestOptionsSchemaReasoningEffortList(t *testing.T) {
	t.Parallel()
	opts, err := client.DescribeOptions(client.OptionsSchema(client.SharedOptions{ReasoningEffort: &client.ReasoningEffort{DefaultDescription: "x"}}))
	if err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, o := range opts {
		if o.Name == "reasoningEffort" {
			for _, v := range o.Schema["enum"].([]any) {
				enum = append(enum, v.(string))
			}
		}
	}
	if diff := cmp.Diff([]string{"minimal", "low", "medium", "high"}, enum); diff != "" {
		t.Errorf("reasoningEffort enum (-want +got):\n%s", diff)
	}
	// ReasoningEfforts hands out a copy: changing it changes no schema.
	client.ReasoningEfforts()[0] = "changed"
	if got := client.ReasoningEfforts()[0]; got != "minimal" {
		t.Errorf("ReasoningEfforts()[0] = %q after a caller changed its copy, want minimal", got)
	}
}

func TestOptionsSchemaPanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		shared client.SharedOptions
		extra  []client.Option
		want   string
	}{
		{"shared name as extra", client.SharedOptions{}, []client.Option{{Name: "maxActions", Description: "d", Default: 1}}, `client option "maxActions" is shared`},
		{"duplicate extra", client.SharedOptions{}, []client.Option{{Name: "a", Description: "d", Default: 1}, {Name: "a", Description: "d", Default: 1}}, `client option "a" is declared twice`},
		{"no description", client.SharedOptions{}, []client.Option{{Name: "a", Default: 1}}, `client option "a" has no description`},
		{"no default", client.SharedOptions{}, []client.Option{{Name: "a", Description: "d"}}, `client option "a" has neither a default nor a default description`},
		{"both defaults", client.SharedOptions{}, []client.Option{{Name: "a", Description: "d", Default: 1, DefaultDescription: "one"}}, `client option "a" has both a default and a default description`},
		{"bad timeout", client.SharedOptions{Timeout: "3 minutes"}, nil, `client default timeout "3 minutes" is not a duration`},
		{"maxActions without action", client.SharedOptions{MaxActions: &client.MaxActions{Default: 3}}, nil, "needs the client's Action"},
		{"maxActions without default", client.SharedOptions{MaxActions: &client.MaxActions{Action: "a"}}, nil, "needs either a Default above zero or a DefaultDescription"},
		{"reasoningEffort without default", client.SharedOptions{ReasoningEffort: &client.ReasoningEffort{}}, nil, "needs a DefaultDescription"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Errorf("OptionsSchema panicked with %v, want a panic containing %q", r, tc.want)
				}
			}()
			client.OptionsSchema(tc.shared, tc.extra...)
		})
	}
}

func TestDescribeOptionsRoundTrip(t *testing.T) {
	t.Parallel()
	raw := client.OptionsSchema(client.SharedOptions{Timeout: "300s", AppVersion: true}, client.Option{
		Name:        "computerUseModel",
		Schema:      map[string]any{"type": "string"},
		Description: "Planner.",
		Default:     "anthropic/m",
	})
	got, err := client.DescribeOptions(raw)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
	}
	if diff := cmp.Diff([]string{"appVersion", "computerUseModel", "timeout"}, names); diff != "" {
		t.Errorf("DescribeOptions names (-want +got):\n%s", diff)
	}
	want := client.Option{Name: "computerUseModel", Schema: map[string]any{"type": "string"}, Description: "Planner.", Default: "anthropic/m"}
	if diff := cmp.Diff(want, got[1]); diff != "" {
		t.Errorf("DescribeOptions(computerUseModel) (-want +got):\n%s", diff)
	}
	if _, err := client.DescribeOptions(json.RawMessage(`{`)); err == nil {
		t.Errorf("DescribeOptions(broken JSON) = nil error, want one")
	}
	if opts, err := client.DescribeOptions(nil); err != nil || opts != nil {
		t.Errorf("DescribeOptions(nil) = %v, %v; want no options", opts, err)
	}
}

// TestTimeoutPattern checks that the schema accepts the durations
// time.ParseDuration reads, without a sign, and refuses the rest.
func TestTimeoutPattern(t *testing.T) {
	t.Parallel()
	raw := client.OptionsSchema(client.SharedOptions{})
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:options.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("mem:options.json")
	if err != nil {
		t.Fatalf("compiling the options schema: %v", err)
	}
	for _, tc := range []struct {
		timeout string
		valid   bool
	}{
		{"90s", true}, {"5m", true}, {"1h30m", true}, {"1.5m", true}, {"500ms", true}, {"10µs", true},
		{"", false}, {"5", false}, {"-5s", false}, {"5 minutes", false}, {"5d", false}, {"none", false},
	} {
		err := schema.Validate(map[string]any{"timeout": tc.timeout})
		if (err == nil) != tc.valid {
			t.Errorf("validate timeout %q: %v, want valid %v", tc.timeout, err, tc.valid)
		}
		if _, perr := time.ParseDuration(tc.timeout); tc.valid && perr != nil {
			t.Errorf("timeout %q is valid by the schema but time.ParseDuration says %v", tc.timeout, perr)
		}
	}
}
