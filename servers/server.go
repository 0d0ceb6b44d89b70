// Package servers declares the MCP servers of an eval, connects to them
// through the official MCP Go SDK (stdio and streamable HTTP), and runs the
// readiness check MST makes before the first trial.
package servers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Server is one MCP server as a variant uses it.
type Server struct {
	// Name is the server's key in the eval config.
	Name string `json:"name"`

	// Command, Args, Env and Dir start a stdio server. A relative Command
	// that contains a slash has already been resolved against the config's
	// folder. Env is added to a minimal environment (PATH, HOME, TMPDIR).
	// Values of Env and Headers may hold references to secrets,
	// ${secret:NAME}, which stay references in the plan, the bundle and
	// run.json; the worker replaces them (Resolve) just before use.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`

	// URL and Headers reach a streamable-HTTP server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// OAuth marks a connector server: every request carries
	// Authorization: Bearer with the current value of the access token
	// named OAuth.Token, which the coordinator hands the worker. The
	// plan, the bundle and run.json hold the name, never a value.
	OAuth *OAuth `json:"oauth,omitempty"`
	// Bearer gives the access token of a connector server at the moment
	// of each request, or says why there is none. The worker sets it (see
	// Resolve); it is never written anywhere.
	Bearer func(ctx context.Context) (string, error) `json:"-"`
	// BearerRejected, when set, is told of a value the server refused
	// (401) so that Bearer gives another; the request is then sent once
	// more with it.
	BearerRejected func(value string) `json:"-"`

	// StartupTimeout bounds connecting and listing tools; 0 means 30s.
	StartupTimeout time.Duration `json:"startupTimeout,omitempty"`

	// Tools rewrites the metadata of the server's tools for a variant,
	// keyed by the tool's name on the server.
	Tools map[string]ToolOverride `json:"tools,omitempty"`

	// Writes names the server's tools that change something (the eval
	// config's writes), for dry runs.
	Writes []string `json:"writes,omitempty"`
	// Simulated gives, per tool, the result a dry run answers a call of it
	// with; a write tool without one gets a generated result.
	Simulated map[string]SimulatedResult `json:"simulated,omitempty"`
	// DryRun is the variant's dry-run mode for this server: "" or "off"
	// (every call reaches the server), "declared" (calls of Writes are
	// simulated) or "annotated" (also every tool the server does not
	// annotate read-only).
	DryRun string `json:"dryRun,omitempty"`
	// Faults are the variant's injected faults for this server, in order.
	Faults []Fault `json:"faults,omitempty"`
}

// OAuth is what a worker knows of a connector server's authorization: the
// name its access token travels under. The grant itself stays with the
// coordinator.
type OAuth struct {
	Token string `json:"token"`
}

// TokenNamePrefix starts the name of every connector server's access
// token.
const TokenNamePrefix = "MST_OAUTH_"

// TokenNames names the access token of each connector server in servers:
// MST_OAUTH_ and the server's name in capitals with '-' as '_'; when two
// names would come out the same (a-b and a_b, Notes and notes), each of
// those gets a suffix of its own, from a hash of its name. Every name is
// a shell variable name, as the secrets Set needs.
func TokenNames(servers []string) map[string]string {
	base := func(s string) string {
		var b strings.Builder
		b.WriteString(TokenNamePrefix)
		for _, r := range s {
			switch {
			case r >= 'a' && r <= 'z':
				b.WriteRune(r - 'a' + 'A')
			case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
				b.WriteRune(r)
			default:
				b.WriteByte('_')
			}
		}
		return b.String()
	}
	count := map[string]int{}
	for _, s := range servers {
		count[base(s)]++
	}
	out := make(map[string]string, len(servers))
	for _, s := range servers {
		name := base(s)
		if count[name] > 1 {
			sum := sha256.Sum256([]byte(s))
			name += "_" + strings.ToUpper(hex.EncodeToString(sum[:4]))
		}
		out[s] = name
	}
	return out
}

// The dry-run modes of Server.DryRun.
const (
	DryRunOff       = "off"
	DryRunDeclared  = "declared"
	DryRunAnnotated = "annotated"
)

// ToolOverride changes how one tool is offered to the model.
type ToolOverride struct {
	// Name offers the tool under another name; calls of it reach the
	// server under its own, and transcripts record the server's name.
	Name string `json:"name,omitempty"`
	// Title replaces the tool's display title when set.
	Title *string `json:"title,omitempty"`
	// Description replaces the tool's description when set.
	Description *string `json:"description,omitempty"`
	// Parameters replace the descriptions of the tool's input parameters,
	// keyed by the parameter's name in the input schema.
	Parameters map[string]string `json:"parameters,omitempty"`
	// Hidden removes the tool from what the model is offered.
	Hidden bool `json:"hidden,omitempty"`
}

// Rewrites reports whether o changes more than a description or
// visibility: what only MST's proxy can offer.
func (o ToolOverride) Rewrites() bool {
	return o.Name != "" || o.Title != nil || len(o.Parameters) > 0
}

// SimulatedResult is what a dry run answers a call of one tool with.
type SimulatedResult struct {
	// Text is the result's text content.
	Text string `json:"text"`
	// IsError makes the result a tool error.
	IsError bool `json:"isError,omitempty"`
}

// The kinds of Fault.
const (
	FaultLatency    = "latency"    // delay the call by Delay, then forward it
	FaultError      = "error"      // answer with an error result, not forwarded
	FaultProtocol   = "protocol"   // answer with a JSON-RPC error, not forwarded
	FaultDisconnect = "disconnect" // the server goes away: this and later calls fail
)

// Fault is one fault MST's proxy injects into a server's tool calls.
type Fault struct {
	// Kind is one of latency, error, protocol, disconnect.
	Kind string `json:"kind"`
	// Rate is the share of eligible calls the fault hits, in (0, 1]; the
	// draw is a function of the trial and the call's number, so a rerun
	// injects the same faults.
	Rate float64 `json:"rate"`
	// Tools limits the fault to these tools (the server's names); empty
	// means every tool.
	Tools []string `json:"tools,omitempty"`
	// AfterCalls makes only calls after the first AfterCalls of the trial
	// eligible (counted over the server's calls).
	AfterCalls int `json:"afterCalls,omitempty"`
	// Delay is the added latency of a latency fault.
	Delay time.Duration `json:"delay,omitempty"`
	// Message is the text of an error result or of a protocol error.
	Message string `json:"message,omitempty"`
}

// Proxied reports whether s asks for anything only MST's proxy can do:
// renamed tools, new titles or parameter descriptions, dry runs, faults,
// an access token that is fresh at every request (a connector server).
func (s Server) Proxied() bool {
	if s.OAuth != nil {
		// Its token changes during a run; only the proxy, which asks for
		// it at each request, keeps up.
		return true
	}
	for _, o := range s.Tools {
		if o.Rewrites() {
			return true
		}
	}
	return (s.DryRun != "" && s.DryRun != DryRunOff) || len(s.Faults) > 0
}

// Declaration is s as a client given MST's proxies sees it: its name,
// how it is started or reached and its startup timeout, without its
// secrets, tool metadata, dry-run or fault settings, which the proxy keeps.
func (s Server) Declaration() Server {
	return Server{Name: s.Name, Command: s.Command, Args: s.Args, Dir: s.Dir, URL: s.URL, StartupTimeout: s.StartupTimeout}
}

// Transport is "stdio" or "http".
func (s Server) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// secretRef is a reference to a secret inside an env or headers value:
// ${secret:NAME}. A "${secret:" that does not start a well-formed
// reference is an error, so a typo never reaches a server as text.
var (
	secretRef   = regexp.MustCompile(`\$\{secret:([A-Za-z_][A-Za-z0-9_]*)\}`)
	secretStart = "${secret:"
)

// SecretRef is one reference to a secret in a server's declaration.
type SecretRef struct {
	// Where is the key path in the server's declaration: env.KEY or
	// headers.KEY.
	Where string
	// Name is the secret's name, as the secrets file spells it.
	Name string
}

// SecretRefProblem says what is wrong with the ${secret:NAME} references
// of an env or headers value, "" when nothing is: the one rule, which the
// config's loader applies with the value's place and SecretRefs again.
func SecretRefProblem(v string) string {
	if strings.Contains(secretRef.ReplaceAllString(v, ""), secretStart) {
		return "a ${secret:...} reference is malformed: write ${secret:NAME}, NAME as the secrets file spells it (letters, digits and _)"
	}
	return ""
}

// SecretRefs lists the references to secrets in s's env and headers
// values, in a stable order, or says where one is malformed.
func (s Server) SecretRefs() ([]SecretRef, error) {
	var refs []SecretRef
	for _, part := range []struct {
		key string
		m   map[string]string
	}{{"env", s.Env}, {"headers", s.Headers}} {
		for _, k := range slices.Sorted(maps.Keys(part.m)) {
			v := part.m[k]
			where := part.key + "." + k
			for _, m := range secretRef.FindAllStringSubmatch(v, -1) {
				refs = append(refs, SecretRef{Where: where, Name: m[1]})
			}
			if p := SecretRefProblem(v); p != "" {
				return nil, fmt.Errorf("servers.%s.%s: %s", s.Name, where, p)
			}
		}
	}
	return refs, nil
}

// Resolve returns s with every ${secret:NAME} in its env and headers
// values replaced by the value lookup gives for NAME. An unknown name is
// an error naming the place and the secret, never a value.
func (s Server) Resolve(lookup func(name string) (string, bool)) (Server, error) {
	refs, err := s.SecretRefs()
	if err != nil || len(refs) == 0 {
		return s, err
	}
	resolve := func(part string, m map[string]string) (map[string]string, error) {
		out := make(map[string]string, len(m))
		for k, v := range m {
			var missing string
			out[k] = secretRef.ReplaceAllStringFunc(v, func(ref string) string {
				name := secretRef.FindStringSubmatch(ref)[1]
				val, ok := lookup(name)
				if !ok && missing == "" {
					missing = name
				}
				return val
			})
			if missing != "" {
				return nil, fmt.Errorf("servers.%s.%s.%s refers to the secret %s, which this worker was not given: set %s in the secrets file", s.Name, part, k, missing, missing)
			}
		}
		return out, nil
	}
	if s.Env, err = resolve("env", s.Env); err != nil {
		return s, err
	}
	if s.Headers, err = resolve("headers", s.Headers); err != nil {
		return s, err
	}
	return s, nil
}
