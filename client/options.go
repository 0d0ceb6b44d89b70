package client

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"time"
)

// The shared option names. Each means one thing for every client that takes
// it; a client takes only those it can honour, so a config that sets one
// its client cannot use fails validation when the eval loads.
const (
	// OptionTimeout is the longest time from the prompt to the transcript,
	// without app setup, as a Go duration.
	OptionTimeout = "timeout"
	// OptionMaxActions is the most actions a trial may take.
	OptionMaxActions = "maxActions"
	// OptionReasoningEffort is how much the model reasons before it answers.
	OptionReasoningEffort = "reasoningEffort"
	// OptionAppVersion is the version of the installed app a run requires.
	OptionAppVersion = "appVersion"
	// OptionAPIKeyEnv names the variable a client reads its model
	// provider's key from instead of the provider's own. Like timeout, it
	// is MST's: the plan lifts it out of the options into
	// OpenParams.KeyEnv.
	OptionAPIKeyEnv = "apiKeyEnv"
	// OptionBuiltinTools names the client's own built-in tools (a CLI's
	// shell, file and web tools) a trial may use. Unset or empty, every
	// built-in tool is off: the model sees only the variant's MCP servers.
	OptionBuiltinTools = "builtinTools"
)

// ReasoningEfforts returns the values reasoningEffort takes, the same list
// for every client, from least to most. The slice is the caller's own.
func ReasoningEfforts() []string {
	return []string{"minimal", "low", "medium", "high"}
}

// durationPattern matches what time.ParseDuration accepts, without a sign:
// "90s", "1.5m", "1h30m".
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

var durationRE = regexp.MustCompile(durationPattern)

// SharedOptions says which shared options a client takes and what each one
// defaults to for that client. Every client takes timeout.
type SharedOptions struct {
	// Timeout is the client's default timeout as a Go duration ("180s").
	// Empty means the client's trials have no time limit unless the variant
	// sets one.
	Timeout string
	// MaxActions, when set, adds maxActions.
	MaxActions *MaxActions
	// ReasoningEffort, when set, adds reasoningEffort.
	ReasoningEffort *ReasoningEffort
	// AppVersion adds appVersion; for clients that drive an installed app.
	AppVersion bool
	// BuiltinTools, when set, adds builtinTools: the names of the client's
	// own tools a variant may turn on, each with what it does.
	BuiltinTools map[string]string
	// AlwaysOn, with BuiltinTools, names the client's own tools no setting
	// of its program turns off, each with what it does and when it is
	// offered: builtinTools' description says so rather than claim that
	// every tool it does not name is off.
	AlwaysOn map[string]string
}

// MaxActions describes a client's maxActions.
type MaxActions struct {
	// Action says what counts as an action for this client, as a plural
	// noun phrase that may explain itself ("tool calls", "agent turns, as
	// the CLI's --max-turns counts them").
	Action string
	// Default is the literal default; zero means there is none, and
	// DefaultDescription says what happens instead.
	Default int
	// DefaultDescription says what an unset maxActions means when there is
	// no literal default ("no limit").
	DefaultDescription string
}

// ReasoningEffort describes a client's reasoningEffort.
type ReasoningEffort struct {
	// DefaultDescription says what an unset reasoningEffort means for this
	// client ("the provider's default").
	DefaultDescription string
}

// Option is one property of a client's options schema.
type Option struct {
	// Name is the option's key in clientOptions.
	Name string
	// Schema is the JSON Schema of the option's value without its
	// annotations: {"type": "string", "enum": [...]}.
	Schema map[string]any
	// Description says what the option does, in a sentence or two.
	Description string
	// Default is the literal default, or nil.
	Default any
	// DefaultDescription says, when there is no literal default, what an
	// unset option means: a dynamic default ("the variant's model") or what
	// leaving it out does ("none"). It is the schema's x-defaultDescription.
	DefaultDescription string
}

// OptionsSchema returns the JSON Schema of a client's clientOptions: an
// object with additionalProperties false whose properties are the shared
// options the client takes (as shared says) and its own (extra). Every
// property has a description, and a "default" or an
// "x-defaultDescription". The output is compact JSON, the same for the
// same input.
//
// It panics on a programming error: an extra option that reuses a shared
// name or another extra option's name, lacks a description, or has not
// exactly one kind of default; a shared option whose default is missing or
// not valid.
func OptionsSchema(shared SharedOptions, extra ...Option) json.RawMessage {
	opts := sharedOptions(shared)
	seen := map[string]bool{}
	for _, o := range opts {
		seen[o.Name] = true
	}
	for _, o := range extra {
		if isShared(o.Name) {
			panic(fmt.Sprintf("client option %q is shared: declare it through SharedOptions", o.Name))
		}
		if seen[o.Name] {
			panic(fmt.Sprintf("client option %q is declared twice", o.Name))
		}
		seen[o.Name] = true
		opts = append(opts, o)
	}
	props := map[string]any{}
	for _, o := range opts {
		props[o.Name] = o.property()
	}
	b, err := json.Marshal(struct {
		Type                 string         `json:"type"`
		AdditionalProperties bool           `json:"additionalProperties"`
		Properties           map[string]any `json:"properties"`
	}{"object", false, props})
	if err != nil {
		panic(fmt.Sprintf("client options schema: %v", err))
	}
	return b
}

// isShared reports whether name is one of the shared option names.
func isShared(name string) bool {
	switch name {
	case OptionTimeout, OptionMaxActions, OptionReasoningEffort, OptionAppVersion, OptionBuiltinTools:
		return true
	}
	return false
}

// sharedOptions returns the shared options shared selects.
func sharedOptions(shared SharedOptions) []Option {
	timeout := Option{
		Name: OptionTimeout,
		Schema: map[string]any{
			"type":                "string",
			"pattern":             durationPattern,
			"patternErrorMessage": "must be a duration such as 90s, 5m or 1h30m",
			"examples":            []string{"90s", "5m"},
		},
		Description: "Longest time from the prompt to the transcript, not counting app setup, as a Go duration. A trial that takes longer ends timed-out.",
	}
	if shared.Timeout == "" {
		timeout.DefaultDescription = "none"
	} else {
		if !durationRE.MatchString(shared.Timeout) {
			panic(fmt.Sprintf("client default timeout %q is not a duration such as 90s or 5m", shared.Timeout))
		}
		if _, err := time.ParseDuration(shared.Timeout); err != nil {
			panic(fmt.Sprintf("client default timeout %q: %v", shared.Timeout, err))
		}
		timeout.Default = shared.Timeout
	}
	opts := []Option{timeout}
	if m := shared.MaxActions; m != nil {
		if m.Action == "" {
			panic("client option maxActions needs the client's Action")
		}
		if (m.Default > 0) == (m.DefaultDescription != "") {
			panic("client option maxActions needs either a Default above zero or a DefaultDescription")
		}
		o := Option{
			Name:               OptionMaxActions,
			Schema:             map[string]any{"type": "integer", "minimum": 1},
			Description:        fmt.Sprintf("Most actions one trial may take (here: %s); a trial that needs more ends as no-answer.", m.Action),
			DefaultDescription: m.DefaultDescription,
		}
		if m.Default > 0 {
			o.Default = m.Default
		}
		opts = append(opts, o)
	}
	if r := shared.ReasoningEffort; r != nil {
		if r.DefaultDescription == "" {
			panic("client option reasoningEffort needs a DefaultDescription")
		}
		opts = append(opts, Option{
			Name:               OptionReasoningEffort,
			Schema:             map[string]any{"type": "string", "enum": ReasoningEfforts()},
			Description:        "How much the model reasons before it answers, for models that support it.",
			DefaultDescription: r.DefaultDescription,
		})
	}
	if shared.AppVersion {
		opts = append(opts, Option{
			Name:               OptionAppVersion,
			Schema:             map[string]any{"type": "string", "minLength": 1},
			Description:        "Version of the app the run requires: a session fails to open on any other version. Either way the transcript records the version that ran.",
			DefaultDescription: "any installed version",
		})
	}
	if len(shared.BuiltinTools) > 0 {
		names := make([]string, 0, len(shared.BuiltinTools))
		for n := range shared.BuiltinTools {
			names = append(names, n)
		}
		sort.Strings(names)
		off, none := "every other built-in tool is off, so the model sees only the variant's MCP servers", "none: every built-in tool is off"
		if len(shared.AlwaysOn) > 0 {
			off, none = "every other built-in tool is off but those always on (below)", "none: every built-in tool is off but those always on"
		}
		desc := "The client's own tools a trial may use, by name; " + off + ". Calls of built-in tools are recorded as tool calls of the server \"" + BuiltinServer + "\". Names:"
		for _, n := range names {
			desc += " " + n + " (" + shared.BuiltinTools[n] + ");"
		}
		desc = desc[:len(desc)-1] + "."
		if len(shared.AlwaysOn) > 0 {
			on := make([]string, 0, len(shared.AlwaysOn))
			for n := range shared.AlwaysOn {
				on = append(on, n)
			}
			sort.Strings(on)
			desc += " Always on when the variant has servers, whatever this option says (the program has no setting that turns them off):"
			for _, n := range on {
				desc += " " + n + " (" + shared.AlwaysOn[n] + ");"
			}
			desc = desc[:len(desc)-1] + "."
		}
		opts = append(opts, Option{
			Name:               OptionBuiltinTools,
			Schema:             map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": names}, "uniqueItems": true},
			Description:        desc,
			DefaultDescription: none,
		})
	}
	return opts
}

// BuiltinServer is the server name under which a transcript records calls
// of a client's own built-in tools (a CLI's shell or file edits), so that
// graders on tool calls see them like MCP calls. An eval's servers may not
// use this name.
const BuiltinServer = "builtin"

// property returns o as a JSON Schema property. It panics when o lacks a
// description, or does not state its default exactly one way.
func (o Option) property() map[string]any {
	if o.Description == "" {
		panic(fmt.Sprintf("client option %q has no description", o.Name))
	}
	if o.Default != nil && o.DefaultDescription != "" {
		panic(fmt.Sprintf("client option %q has both a default and a default description", o.Name))
	}
	if o.Default == nil && o.DefaultDescription == "" {
		panic(fmt.Sprintf("client option %q has neither a default nor a default description", o.Name))
	}
	p := make(map[string]any, len(o.Schema)+2)
	for k, v := range o.Schema {
		p[k] = v
	}
	p["description"] = o.Description
	if o.Default != nil {
		p["default"] = o.Default
	}
	if o.DefaultDescription != "" {
		p["x-defaultDescription"] = o.DefaultDescription
	}
	return p
}

// DescribeOptions reads an options schema (one made by OptionsSchema, or
// any object schema a client declares) back into its options, sorted by
// name. It fills in nothing: an option without a default in the schema has
// none here. An empty schema has no options.
func DescribeOptions(schema json.RawMessage) ([]Option, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	var doc struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, fmt.Errorf("reading the options schema: %w", err)
	}
	names := make([]string, 0, len(doc.Properties))
	for n := range doc.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	opts := make([]Option, 0, len(names))
	for _, n := range names {
		o := Option{Name: n, Schema: map[string]any{}}
		for k, v := range doc.Properties[n] {
			switch k {
			case "description":
				o.Description, _ = v.(string)
			case "default":
				o.Default = v
			case "x-defaultDescription":
				o.DefaultDescription, _ = v.(string)
			default:
				o.Schema[k] = v
			}
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// SharedOptionNames lists the shared option names in a fixed order.
func SharedOptionNames() []string {
	return []string{OptionTimeout, OptionMaxActions, OptionReasoningEffort, OptionAppVersion}
}

// DesktopOptions is the options schema of a desktop app client: the shared
// timeout (with the app's default), maxActions over UI actions, appVersion,
// and the Computer Use planner model used on macOS.
func DesktopOptions(timeout string) json.RawMessage {
	return OptionsSchema(SharedOptions{
		Timeout:    timeout,
		MaxActions: &MaxActions{Action: "UI actions such as clicks, keystrokes and screenshots", Default: 50},
		AppVersion: true,
	},
		Option{
			Name:        "computerUseModel",
			Schema:      map[string]any{"type": "string", "pattern": "^anthropic/.+$", "patternErrorMessage": "must be an Anthropic model as anthropic/MODEL"},
			Description: "The model that plans Computer Use actions on macOS, as anthropic/MODEL. Linux runs the accessibility automation, which has no planner, and does not use it.",
			Default:     "anthropic/claude-sonnet-4-5",
		},
	)
}
