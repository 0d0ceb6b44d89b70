package builtin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/provider"
)

func TestClientNames(t *testing.T) {
	t.Parallel()
	want := []string{"api", "chatgpt", "claude-code", "codex-app", "codex-cli", "cowork", "gemini-cli"}
	if diff := cmp.Diff(want, builtin.Clients().Names()); diff != "" {
		t.Errorf("Clients().Names() (-want +got):\n%s", diff)
	}
}

// TestProviders pins the built-in providers, the keys they read, and that
// the api client runs exactly those MST implements.
func TestProviders(t *testing.T) {
	t.Parallel()
	reg := builtin.Providers()
	for _, tt := range []struct {
		what      string
		got, want []string
	}{
		{"Providers().Names()", reg.Names(), []string{"anthropic", "google", "offline", "openai"}},
		{"provider.Buildable(Providers())", provider.Buildable(reg), []string{"anthropic", "offline", "openai"}},
		{"provider.KeyVars(Providers())", provider.KeyVars(reg), []string{"ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"}},
	} {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.what, diff)
		}
	}
	api, err := builtin.Clients().Lookup("api")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(provider.Buildable(reg), api.ModelProviders); diff != "" {
		t.Errorf("api client's ModelProviders (-registry +client):\n%s", diff)
	}
}

func TestCheckClient(t *testing.T) {
	t.Parallel()
	reg := builtin.Clients()
	for _, tc := range []struct {
		name, goos string
		want       string // "" means no error
	}{
		{"api", "linux", ""},
		{"api", "darwin", ""},
		{"api", "windows", ""},
		{"nope", "linux", `unknown client "nope" (known: api, chatgpt, claude-code, codex-app, codex-cli, cowork, gemini-cli)`},
		{"claude-code", "linux", ""},
		{"claude-code", "windows", ""},
		{"codex-cli", "darwin", ""},
		{"gemini-cli", "windows", ""},
		{"cowork", "windows", "client cowork runs on macos, linux; this run's machine is windows"},
		{"cowork", "linux", ""},
		{"cowork", "darwin", ""},
		{"chatgpt", "windows", "client chatgpt runs on macos, linux; this run's machine is windows"},
		{"chatgpt", "linux", ""},
		{"codex-app", "darwin", ""},
		{"codex-app", "freebsd", "client codex-app runs on macos, linux; this run's machine is freebsd"},
	} {
		err := client.CheckOS(reg, tc.name, tc.goos)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckClient(%s, %s) = %q\nwant %q", tc.name, tc.goos, got, tc.want)
		}
	}
}

func TestCheckClientNoOSMeansAny(t *testing.T) {
	t.Parallel()
	run := func(context.Context, client.OpenParams, client.Trial) (client.Result, error) {
		return client.Result{}, nil
	}
	reg := client.NewRegistry(&client.Definition{Name: "anywhere", Run: run})
	if err := client.CheckOS(reg, "anywhere", "plan9"); err != nil {
		t.Errorf("CheckClient(a client with no OS list, plan9) = %v, want nil", err)
	}
}

// TestClientDefinitions holds every built-in definition to the contract:
// requirements, a well-formed options schema whose defaults validate, the
// shared options each client takes and their defaults.
func TestClientDefinitions(t *testing.T) {
	t.Parallel()
	type shape struct {
		timeout    string // literal default: every client has one, so a trial always ends
		shared     []string
		overrides  []string
		concurrent bool
	}
	cli := []string{"maxActions", "reasoningEffort", "timeout"}
	app := []string{"appVersion", "maxActions", "timeout"}
	want := map[string]shape{
		"api":         {"300s", cli, []string{"model", "clientOptions"}, true},
		"claude-code": {"180s", cli, []string{"model", "clientOptions"}, true},
		"codex-cli":   {"300s", cli, []string{"model", "clientOptions"}, true},
		"gemini-cli":  {"300s", []string{"maxActions", "timeout"}, []string{"model", "clientOptions"}, true},
		"cowork":      {"900s", app, nil, false},
		"chatgpt":     {"300s", app, nil, false},
		"codex-app":   {"300s", app, nil, false},
	}
	reg := builtin.Clients()
	for _, name := range reg.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := reg.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[name]
			if !ok {
				t.Fatalf("client %s is registered but this test does not know it: add it to want", name)
			}
			if d.Timeout <= 0 {
				t.Errorf("%s: Timeout = %v, want a finite default: a trial without one can hang the run for ever", name, d.Timeout)
			}
			if d.Description == "" || len(d.Requirements.OS) == 0 || len(d.Requirements.Credentials) == 0 {
				t.Errorf("%s: description %q, OS %v, credentials %v: want all three", name, d.Description, d.Requirements.OS, d.Requirements.Credentials)
			}
			for _, goos := range d.Requirements.OS {
				if !slices.Contains([]string{"linux", "darwin", "windows"}, goos) {
					t.Errorf("%s: OS %q is not a GOOS value MST knows", name, goos)
				}
			}
			if d.Concurrent != w.concurrent {
				t.Errorf("%s: Concurrent = %v, want %v", name, d.Concurrent, w.concurrent)
			}
			if diff := cmp.Diff(w.overrides, d.CaseOverrides); diff != "" {
				t.Errorf("%s: CaseOverrides (-want +got):\n%s", name, diff)
			}

			var top map[string]any
			if err := json.Unmarshal(d.Options, &top); err != nil {
				t.Fatalf("%s: options schema is not JSON: %v", name, err)
			}
			if top["type"] != "object" || top["additionalProperties"] != false {
				t.Errorf("%s: options schema type %v, additionalProperties %v; want object, false", name, top["type"], top["additionalProperties"])
			}
			opts, err := client.DescribeOptions(d.Options)
			if err != nil {
				t.Fatal(err)
			}
			defaults := map[string]any{}
			var shared []string
			for _, o := range opts {
				if o.Description == "" {
					t.Errorf("%s: option %s has no description", name, o.Name)
				}
				if (o.Default == nil) == (o.DefaultDescription == "") {
					t.Errorf("%s: option %s: default %v, x-defaultDescription %q; want exactly one", name, o.Name, o.Default, o.DefaultDescription)
				}
				if o.Default != nil {
					defaults[o.Name] = o.Default
				}
				if slices.Contains(client.SharedOptionNames(), o.Name) {
					shared = append(shared, o.Name)
				}
			}
			if diff := cmp.Diff(w.shared, shared); diff != "" {
				t.Errorf("%s: shared options (-want +got):\n%s", name, diff)
			}
			gotTimeout, _ := defaults["timeout"].(string)
			if gotTimeout != w.timeout {
				t.Errorf("%s: timeout default = %q, want %q", name, gotTimeout, w.timeout)
			}
			wantDur, _ := time.ParseDuration(w.timeout) // zero for ""
			if got := d.Timeout; got != wantDur {
				t.Errorf("%s: Timeout = %v, want %v", name, got, wantDur)
			}

			schema := compile(t, d.Options)
			if err := schema.Validate(defaults); err != nil {
				t.Errorf("%s: the literal defaults %v do not validate: %v", name, defaults, err)
			}
			if err := schema.Validate(map[string]any{"noSuchOption": true}); err == nil {
				t.Errorf("%s: an unknown option validates, want it refused", name)
			}
			if !slices.Contains(w.shared, "appVersion") {
				if err := schema.Validate(map[string]any{"appVersion": "1.0"}); err == nil {
					t.Errorf("%s: appVersion validates, but %s drives no app", name, name)
				}
			}
		})
	}
}

// TestOneReasoningEffortList checks that every built-in client that takes
// reasoningEffort offers the same values.
func TestOneReasoningEffortList(t *testing.T) {
	t.Parallel()
	reg := builtin.Clients()
	want := client.ReasoningEfforts()
	n := 0
	for _, name := range reg.Names() {
		d, _ := reg.Lookup(name)
		opts, err := client.DescribeOptions(d.Options)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range opts {
			if o.Name != "reasoningEffort" {
				continue
			}
			n++
			var got []string
			list, _ := o.Schema["enum"].([]any)
			for _, v := range list {
				s, _ := v.(string)
				got = append(got, s)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: reasoningEffort enum (-want +got):\n%s", name, diff)
			}
		}
	}
	if n < 3 {
		t.Errorf("%d clients take reasoningEffort, want at least api, claude-code and codex-cli", n)
	}
}

func TestOSName(t *testing.T) {
	t.Parallel()
	for goos, want := range map[string]string{"darwin": "macos", "linux": "linux", "windows": "windows"} {
		if got := client.OSName(goos); got != want {
			t.Errorf("OSName(%s) = %s, want %s", goos, got, want)
		}
	}
}

func compile(t *testing.T, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:options.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:options.json")
	if err != nil {
		t.Fatalf("compiling the options schema: %v", err)
	}
	return s
}

// TestUnbuiltClientsOpenFailsLikeAvailable checks that a client this build
// cannot run refuses Open with its Available error, should a caller skip
// the check at load.
func TestUnbuiltClientsOpenFailsLikeAvailable(t *testing.T) {
	t.Parallel()
	reg := builtin.Clients()
	for _, name := range reg.Names() {
		d, _ := reg.Lookup(name)
		if d.Available == nil || !slices.Contains(d.Requirements.OS, runtime.GOOS) {
			continue
		}
		want := d.Available(runtime.GOOS)
		if want == nil {
			continue
		}
		if d.Open == nil {
			t.Errorf("%s: no Open", name)
			continue
		}
		s, err := d.Open(t.Context(), client.OpenParams{})
		if s != nil || err == nil || err.Error() != want.Error() {
			t.Errorf("%s: Open = %v, %v; want no session and %q", name, s, err, want)
		}
	}
}
