package mcpproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
)

// view is how a variant offers one server's tools.
type view struct {
	server  string
	offered []*mcp.Tool          // as the client sees them, in the server's order
	real    map[string]string    // offered name → server name
	renamed map[string]string    // server name → offered name, renamed tools only
	listed  map[string]*mcp.Tool // server name → the server's own tool
	hash    string               // of the server's own list
}

// newView applies s.Tools to the server's own list, once
// servers.CheckOverrides has found them sound.
func newView(s servers.Server, listed []*mcp.Tool) (*view, error) {
	if err := servers.CheckOverrides(s, listed); err != nil {
		return nil, err
	}
	v := &view{server: s.Name, real: map[string]string{}, renamed: map[string]string{}, listed: map[string]*mcp.Tool{}, hash: ListHash(listed)}
	for _, t := range listed {
		v.listed[t.Name] = t
		o := s.Tools[t.Name]
		if o.Hidden {
			continue
		}
		c := rewrite(t, o)
		v.real[c.Name] = t.Name
		if c.Name != t.Name {
			v.renamed[t.Name] = c.Name
		}
		v.offered = append(v.offered, c)
	}
	return v, nil
}

// rewrite returns a copy of t as the override o offers it, with an input
// schema the SDK accepts: an object schema (a server that sends none, or
// one of another type, gets the empty object schema, which takes any
// arguments).
func rewrite(t *mcp.Tool, o servers.ToolOverride) *mcp.Tool {
	c := *t
	if o.Name != "" {
		c.Name = o.Name
	}
	if o.Title != nil {
		c.Title = *o.Title
		if c.Annotations != nil && c.Annotations.Title != "" {
			a := *c.Annotations
			a.Title = *o.Title
			c.Annotations = &a
		}
	}
	if o.Description != nil {
		c.Description = *o.Description
	}
	schema := objectSchema(t.InputSchema)
	if len(o.Parameters) > 0 {
		props, _ := schema["properties"].(map[string]any)
		newProps := maps.Clone(props)
		for p := range o.Parameters {
			prop, ok := props[p].(map[string]any)
			if !ok {
				continue // CheckOverrides found it; a schema that is not an object has none
			}
			prop = maps.Clone(prop)
			prop["description"] = o.Parameters[p]
			newProps[p] = prop
		}
		schema = maps.Clone(schema)
		schema["properties"] = newProps
	}
	c.InputSchema = schema
	return &c
}

// objectSchema returns schema as a JSON object of type "object", or the
// empty object schema when it is not one.
func objectSchema(schema any) map[string]any {
	var m map[string]any
	switch s := schema.(type) {
	case map[string]any:
		m = s
	default:
		if b, err := json.Marshal(s); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	if m == nil || m["type"] != "object" {
		return map[string]any{"type": "object"}
	}
	return m
}

// ListHash is the SHA-256, in hex, of a server's own tool list: every
// field of every tool as the server sent it, in its order.
func ListHash(tools []*mcp.Tool) string {
	h := sha256.New()
	for _, t := range tools {
		b, err := json.Marshal(t)
		if err != nil {
			b = []byte(t.Name)
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// offeredHash is the hash transcripts record as a server's ToolsHash: the
// tools as offered (names, descriptions, input schemas), the same sum
// servers.ToolsHash makes for clients that connect directly.
func (v *view) offeredHash() string {
	tools := make([]servers.Tool, len(v.offered))
	for i, t := range v.offered {
		schema, _ := json.Marshal(t.InputSchema)
		tools[i] = servers.Tool{Server: v.server, Name: t.Name, Description: t.Description, InputSchema: schema}
	}
	return servers.ToolsHash(tools)
}

// simulated returns the server names of the tools a dry run in mode
// answers itself.
func (v *view) simulated(s servers.Server) map[string]bool {
	out := map[string]bool{}
	switch s.DryRun {
	case servers.DryRunDeclared, servers.DryRunAnnotated:
		for _, w := range s.Writes {
			out[w] = true
		}
	}
	if s.DryRun == servers.DryRunAnnotated {
		for name, t := range v.listed {
			// The MCP defaults: a tool without annotations may change
			// things (readOnlyHint false).
			if t.Annotations == nil || !t.Annotations.ReadOnlyHint {
				out[name] = true
			}
		}
	}
	return out
}
