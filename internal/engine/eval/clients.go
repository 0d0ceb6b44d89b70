package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/servers"
)

// ClientCatalog is a Catalog that knows each client's definition, not
// only its options schema. Load then checks each variant against its
// client (checkClients): the model's provider, the client's own check of
// the model and options, and what only MST's proxy offers. A Catalog
// without it has those checks skipped.
type ClientCatalog interface {
	// ClientDefinition returns the named client's definition; an unknown
	// client is an error, as for ClientOptions.
	ClientDefinition(name string) (*client.Definition, error)
}

// CheckModel checks that a client can run a model's provider: a variant's
// model when the eval loads, and a case's own model when the plan is made.
func CheckModel(def *client.Definition, model string) error {
	if len(def.ModelProviders) == 0 || model == "" {
		return nil
	}
	p := provider.Of(model)
	if slices.Contains(def.ModelProviders, p) {
		return nil
	}
	return fmt.Errorf("client %s runs models of %s, not %q: write %s/MODEL", def.Name, strings.Join(def.ModelProviders, ", "), model, def.ModelProviders[0])
}

// OwnOptions are MST's own keys of clientOptions (timeout, apiKeyEnv),
// lifted out of them by LiftOwnOptions.
type OwnOptions struct {
	// Rest are the other options, for the client; nil when none are left.
	Rest json.RawMessage
	// Timeout is clientOptions.timeout, nil when not set.
	Timeout *time.Duration
	// KeyEnv is clientOptions.apiKeyEnv, "" when not set.
	KeyEnv string
}

// OptionError is a problem with one client option.
type OptionError struct {
	// Option is the option's name ("timeout").
	Option string
	Msg    string
}

// Error is "OPTION: message".
func (e *OptionError) Error() string { return e.Option + ": " + e.Msg }

// LiftOwnOptions takes timeout and apiKeyEnv out of raw client options:
// the one place they are read and checked. Load checks every variant's
// options with it; the plan lifts them with it, a case's overrides
// included. A problem with one of them is an *OptionError.
func LiftOwnOptions(raw json.RawMessage) (OwnOptions, error) {
	var o OwnOptions
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return o, fmt.Errorf(" is not an object: %w", err)
	}
	if v, ok := m[client.OptionTimeout]; ok {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return o, &OptionError{client.OptionTimeout, fmt.Sprintf("%s is not a duration string (write 90s or 5m)", v)}
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return o, &OptionError{client.OptionTimeout, fmt.Sprintf("%q is not a duration (write 90s or 5m)", s)}
		}
		if d == 0 {
			return o, &OptionError{client.OptionTimeout, fmt.Sprintf("%q would let a trial run for ever: give a duration such as 90s or 30m (every trial has a deadline)", s)}
		}
		o.Timeout = &d
		delete(m, client.OptionTimeout)
	}
	if v, ok := m[client.OptionAPIKeyEnv]; ok {
		if err := json.Unmarshal(v, &o.KeyEnv); err != nil || o.KeyEnv == "" {
			return o, &OptionError{client.OptionAPIKeyEnv, fmt.Sprintf("%s is not a variable name", v)}
		}
		delete(m, client.OptionAPIKeyEnv)
	}
	if len(m) > 0 {
		b, err := json.Marshal(m)
		if err != nil {
			return o, err
		}
		o.Rest = b
	}
	return o, nil
}

// ServerOf is server n as variant v uses it: its declaration, the
// variant's changes to its tools, and the variant's dry-run mode and
// faults for it. A connector server's OAuth is left to the caller.
func ServerOf(n string, sc ServerConfig, v Variant) servers.Server {
	s := servers.Server{Name: n, Command: sc.Command, Args: sc.Args, Env: sc.Env, Dir: sc.Cwd, URL: sc.URL, Headers: sc.Headers, StartupTimeout: time.Duration(sc.StartupTimeout), Writes: sc.Writes}
	if over := v.Tools[n]; len(over) > 0 {
		s.Tools = map[string]servers.ToolOverride{}
		for tool, ov := range over {
			s.Tools[tool] = servers.ToolOverride{Name: ov.Name, Title: ov.Title, Description: ov.Description, Parameters: ov.Parameters, Hidden: ov.Hidden}
		}
	}
	if len(sc.Simulated) > 0 {
		s.Simulated = map[string]servers.SimulatedResult{}
		for tool, r := range sc.Simulated {
			s.Simulated[tool] = servers.SimulatedResult{Text: r.Text, IsError: r.IsError}
		}
	}
	if v.DryRun != "" && v.DryRun != servers.DryRunOff {
		s.DryRun = v.DryRun
	}
	for _, f := range v.Faults[n] {
		rate := 1.0
		if f.Rate != nil {
			rate = *f.Rate
		}
		s.Faults = append(s.Faults, servers.Fault{Kind: f.Kind, Rate: rate, Tools: f.Tools, AfterCalls: f.AfterCalls, Delay: time.Duration(f.Delay), Message: f.Message})
	}
	return s
}

// checkClients checks each variant against its client: its client exists,
// its clientOptions pass the client's options schema (compiled once per
// client) and MST's own options (LiftOwnOptions), and, when the catalog
// knows the client's definition (ClientCatalog), the client runs the
// model's provider (CheckModel), accepts the model and options (its
// Check), and takes MST's proxy when the variant needs it
// (checkProxied).
func (l *loader) checkClients(root map[string]any) {
	variants, _ := root["variants"].(map[string]any)
	schemas := map[string]*compiledSchema{}
	cc, _ := l.cat.(ClientCatalog)
	for _, name := range sortedKeys(variants) {
		v, ok := variants[name].(map[string]any)
		if !ok {
			continue
		}
		at := []string{"variants", name}
		clientName := DefaultClient
		if c, has := v["client"]; has {
			s, ok := c.(string)
			if !ok || s == "" {
				continue // the schema reports it
			}
			clientName = s
		}
		cs, known := schemas[clientName]
		if !known {
			var msg string
			cs, msg = l.clientSchema(clientName)
			if msg != "" {
				l.add(child(at, "client"), msg)
			}
			schemas[clientName] = cs
		}
		optsAt := child(at, "clientOptions")
		rawOpts, hasOpts := v["clientOptions"]
		opts, isObj := rawOpts.(map[string]any)
		if isObj && cs != nil {
			if err := cs.schema.Validate(opts); err != nil {
				x := &explainer{cs: cs, doc: l.doc, noun: "option", prefix: optsAt}
				for _, p := range x.explain(err) {
					l.add(p.tokens, p.msg)
				}
			}
		}
		// A value the checks before refused is not refused again, nor
		// handed to the checks that take it as sound (the client's Check).
		optsOK := !hasOpts || (isObj && !l.reported(optsAt))
		var optsJSON json.RawMessage
		if isObj {
			b, err := json.Marshal(opts)
			if err != nil {
				continue
			}
			optsJSON = b
			if _, err := LiftOwnOptions(optsJSON); err != nil {
				optsOK = false
				tokens, msg := optsAt, strings.TrimSpace(err.Error())
				var oe *OptionError
				if errors.As(err, &oe) {
					tokens, msg = child(optsAt, oe.Option), oe.Msg
				}
				if !l.reported(tokens) {
					l.add(tokens, msg)
				}
			}
		}
		if cc == nil || cs == nil {
			continue
		}
		def, err := cc.ClientDefinition(clientName)
		if err != nil {
			continue // clientSchema reported it
		}
		model, modelOK := v["model"].(string)
		modelOK = modelOK && !l.reported(child(at, "model"))
		if modelOK {
			if err := CheckModel(def, model); err != nil {
				l.add(child(at, "model"), err.Error())
			}
		}
		if modelOK && optsOK && def.Check != nil {
			if err := def.Check(model, optsJSON); err != nil {
				tokens, msg := optionPlace(at, opts, err.Error())
				l.add(tokens, msg)
			}
		}
		if !def.ProxiedServers {
			l.checkProxied(root, at, v, clientName)
		}
	}
}

// reported reports whether a problem at tokens, or inside it, has been
// recorded.
func (l *loader) reported(tokens []string) bool {
	path := formatPath(l.doc.root, tokens)
	for _, e := range l.errs {
		if e.Path == path || (strings.HasPrefix(e.Path, path) && strings.ContainsAny(e.Path[len(path):len(path)+1], ".[")) {
			return true
		}
	}
	return false
}

// optionPlace locates the message of a client's Check, which starts with
// the option it is about ("clientOptions.baseURL: …"), at that option of
// the variant at, when the variant sets it; else at the variant.
func optionPlace(at []string, opts map[string]any, msg string) ([]string, string) {
	const prefix = "clientOptions"
	rest, ok := strings.CutPrefix(msg, prefix+".")
	if !ok {
		return at, msg
	}
	name, tail, ok := strings.Cut(rest, ": ")
	if _, set := opts[name]; !ok || !set {
		return at, msg
	}
	return append(child(at, prefix), name), tail
}

// checkProxied refuses what only MST's proxy can do in a variant (at, v)
// whose client starts the servers itself: a connector server, tool
// rewrites, a dry run or faults, and a cap on a server's tool calls.
func (l *loader) checkProxied(root map[string]any, at []string, v map[string]any, clientName string) {
	declared, _ := root["servers"].(map[string]any)
	var used []string
	if list, ok := v["servers"].([]any); ok {
		for _, item := range list {
			if s, ok := item.(string); ok && hasKey(declared, s) && !slices.Contains(used, s) {
				used = append(used, s)
			}
		}
	} else {
		used = sortedKeys(declared)
	}
	var variant Variant
	variantOK := decodeValue(v, &variant)
	limits, _ := root["limits"].(map[string]any)
	calls, _ := limits["serverCalls"].(map[string]any)
	for _, n := range used {
		var sc ServerConfig
		if variantOK && decodeValue(declared[n], &sc) {
			switch {
			case sc.OAuth != nil:
				l.add(at, fmt.Sprintf("client %s starts the servers itself, without MST's proxy, so it cannot keep connector server %s's access token fresh during the run; use a client that takes MST's proxy (mst clients)", clientName, n))
			case ServerOf(n, sc, variant).Proxied():
				l.add(at, fmt.Sprintf("client %s starts the servers itself, without MST's proxy, so it cannot rename tools, change their titles or parameter descriptions, run dry or inject faults (server %s); use a client that takes them (mst clients), or drop these settings from the variant", clientName, n))
			}
		}
		if hasKey(calls, n) {
			l.add(at, fmt.Sprintf("client %s starts the servers itself, without MST's proxy, so MST cannot count its tool calls to server %s (limits.serverCalls.%s); use a client that takes the proxy (mst clients), cap the server's trials with limits.servers instead, or leave the server out of the variant", clientName, n, n))
		}
	}
}

// decodeValue decodes a document value into out as Load's decode would,
// and reports whether it could: a value the checks before found fault
// with may not decode.
func decodeValue(v any, out any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, out) == nil
}
