package geminicli

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/ground/toolname"
	"github.com/mst-eval/mst/servers"
)

// The CLI expands $NAME and ${NAME} in every string of its settings
// files from its environment when it reads them, and then once more, with
// dotenv rules ("\$" for a literal "$", an unknown name as ""), in a stdio
// server's env values and an HTTP server's headers. Settings therefore
// name values rather than hold them: each server env value and header
// value sits in a variable of the CLI's environment (secretVar), so no
// secret of a server is written to a file, and a "$" in any other string
// is written as ${dollarVar}, which the CLI turns back into "$".
const (
	// secretVarPrefix starts the variables that carry server env and
	// header values. "SECRET" in the name makes the CLI keep them out of
	// the environment of the servers and commands it starts.
	secretVarPrefix = "MST_GEMINI_SECRET_"
	// dollarVar holds "$".
	dollarVar = "MST_GEMINI_DOLLAR"
)

// rendered is a trial home's .gemini/settings.json and the variables its
// references need in the CLI's environment ("NAME=value").
type rendered struct {
	settings []byte
	env      []string
}

// settingsJSON renders the .gemini/settings.json of a trial's home: the
// variant's servers as the only MCP servers (trusted, so that headless
// calls need no confirmation), only the built-in tools core names (the
// CLI's names) besides the servers' tools, no telemetry, no usage
// statistics, no auto-update, API-key auth, the provider request attempts,
// and the environment variables that carry secrets kept from the servers
// and the shell the CLI starts. It never holds the key (the CLI reads
// GEMINI_API_KEY from its environment) nor a server's env or header value
// (see secretVarPrefix).
func settingsJSON(srvs []servers.Server, maxAttempts int, core []string) (rendered, error) {
	var r rendered
	blocked := []string{"GEMINI_API_KEY", dollarVar}
	ref := func(v string) string {
		name := secretVarPrefix + strconv.Itoa(len(blocked)-2)
		blocked = append(blocked, name)
		// The CLI's second expansion turns "\$" back into "$".
		r.env = append(r.env, name+"="+strings.ReplaceAll(v, "$", `\$`))
		return "${" + name + "}"
	}
	refs := func(m map[string]string) map[string]string {
		out := make(map[string]string, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out[k] = ref(m[k])
		}
		return out
	}
	mcp := map[string]any{}
	for _, s := range srvs {
		e := map[string]any{"trust": true}
		if s.URL != "" {
			// httpUrl is streamable HTTP; url would be the older SSE.
			e["httpUrl"] = literal(s.URL)
			if len(s.Headers) > 0 {
				e["headers"] = refs(s.Headers)
			}
		} else {
			e["command"] = literal(s.Command)
			args := make([]string, len(s.Args))
			for i, a := range s.Args {
				args[i] = literal(a)
			}
			e["args"] = args
			if len(s.Env) > 0 {
				e["env"] = refs(s.Env)
			}
			if s.Dir != "" {
				e["cwd"] = literal(s.Dir)
			}
		}
		mcp[s.Name] = e
	}
	r.env = append(r.env, dollarVar+"=$")
	// tools.core is an allow-list of the CLI's tools; mcp_* keeps every MCP
	// server's tools (the only servers are the variant's).
	allow := append(append([]string{}, core...), "mcp_*")
	b, err := json.MarshalIndent(map[string]any{
		"mcpServers": mcp,
		"tools":      map[string]any{"core": allow},
		"telemetry":  map[string]any{"enabled": false},
		"privacy":    map[string]any{"usageStatisticsEnabled": false},
		"general":    map[string]any{"disableAutoUpdate": true, "maxAttempts": maxAttempts},
		"security": map[string]any{
			"auth":                         map[string]any{"selectedType": "gemini-api-key"},
			"environmentVariableRedaction": map[string]any{"enabled": true, "blocked": blocked},
		},
	}, "", "  ")
	r.settings = b
	return r, err
}

// literal is s written so that the CLI's expansion gives s back.
func literal(s string) string {
	return strings.ReplaceAll(s, "$", "${"+dollarVar+"}")
}

// toolNamer maps the CLI's names of MCP tools (mcp_SERVER_TOOL, rewritten
// by toolname.Gemini) back to the server and the tool. A trial whose
// servers are MST's proxies knows every tool they offer (client.Trial
// .Tools): a name is then looked up among the CLI's names of those, which
// gives back a tool whose name the CLI rewrote (météo, offered as m_t_o)
// or cut short. Otherwise, or for a name not among them, the prefix is
// matched against the known servers, longest first (server names may
// hold underscores), and the rest kept as it is.
type toolNamer struct {
	prefixes []string // toolname.GeminiValid(SERVER + "_"), longest first
	server   map[string]string
	exact    map[string][2]string // the CLI's name → server, tool
}

func newToolNamer(srvs []servers.Server) *toolNamer {
	n := &toolNamer{server: map[string]string{}}
	for _, s := range srvs {
		p := toolname.GeminiValid(s.Name + "_")
		if _, dup := n.server[p]; dup {
			continue
		}
		n.prefixes = append(n.prefixes, p)
		n.server[p] = s.Name
	}
	sort.SliceStable(n.prefixes, func(i, j int) bool { return len(n.prefixes[i]) > len(n.prefixes[j]) })
	return n
}

// withTools returns a namer that also knows each server's tools, by server
// name (client.Trial.Tools); n itself when tools is empty.
func (n *toolNamer) withTools(tools map[string][]string) *toolNamer {
	if len(tools) == 0 {
		return n
	}
	m := &toolNamer{prefixes: n.prefixes, server: n.server, exact: map[string][2]string{}}
	for srv, names := range tools {
		for _, t := range names {
			cli := toolname.Gemini(srv, t)
			if _, dup := m.exact[cli]; !dup {
				m.exact[cli] = [2]string{srv, t}
			}
		}
	}
	return m
}

// name returns the server and tool of a CLI tool name; server is "" for the
// CLI's own tools (read_file, run_shell_command, …), whose name is kept as
// it is.
func (n *toolNamer) name(cli string) (server, tool string) {
	if st, ok := n.exact[cli]; ok {
		return st[0], st[1]
	}
	for _, p := range n.prefixes {
		if t, ok := strings.CutPrefix(cli, p); ok && t != "" {
			return n.server[p], t
		}
	}
	return "", cli
}
