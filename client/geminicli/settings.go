package geminicli

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/mst-eval/mst/servers"
)

// settingsJSON renders the .gemini/settings.json of a trial's home: the
// variant's servers as the only MCP servers (trusted, so that headless
// calls need no confirmation), no telemetry, no usage statistics, no
// auto-update, API-key auth, and the provider request attempts. It never
// holds the key: the CLI reads GEMINI_API_KEY from its environment.
func settingsJSON(srvs []servers.Server, maxAttempts int) ([]byte, error) {
	mcp := map[string]any{}
	for _, s := range srvs {
		e := map[string]any{"trust": true}
		if s.URL != "" {
			// httpUrl is streamable HTTP; url would be the older SSE.
			e["httpUrl"] = s.URL
			if len(s.Headers) > 0 {
				e["headers"] = s.Headers
			}
		} else {
			e["command"] = s.Command
			e["args"] = append([]string{}, s.Args...)
			if len(s.Env) > 0 {
				e["env"] = s.Env
			}
			if s.Dir != "" {
				e["cwd"] = s.Dir
			}
		}
		mcp[s.Name] = e
	}
	return json.MarshalIndent(map[string]any{
		"mcpServers": mcp,
		"telemetry":  map[string]any{"enabled": false},
		"privacy":    map[string]any{"usageStatisticsEnabled": false},
		"general":    map[string]any{"disableAutoUpdate": true, "maxAttempts": maxAttempts},
		"security":   map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
	}, "", "  ")
}

// invalidNameRE matches what the CLI replaces with "_" in a tool name.
var invalidNameRE = regexp.MustCompile(`[^a-zA-Z0-9_\-.:]`)

// validName is the CLI's generateValidName without its truncation: mcp_
// first unless already there, then every rune outside [a-zA-Z0-9_.:-] as
// "_", and "_" first if the name does not start with a letter or "_".
func validName(name string) string {
	if !strings.HasPrefix(name, "mcp_") {
		name = "mcp_" + name
	}
	name = invalidNameRE.ReplaceAllString(name, "_")
	if c := name[0]; !(c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')) {
		name = "_" + name
	}
	return name
}

// toolNamer maps the CLI's mcp_SERVER_TOOL names back to the server and the
// tool. Server names may hold underscores, so the prefix is matched against
// the known servers, longest first.
type toolNamer struct {
	prefixes []string // validName(SERVER + "_"), longest first
	server   map[string]string
}

func newToolNamer(srvs []servers.Server) *toolNamer {
	n := &toolNamer{server: map[string]string{}}
	for _, s := range srvs {
		p := validName(s.Name + "_")
		if _, dup := n.server[p]; dup {
			continue
		}
		n.prefixes = append(n.prefixes, p)
		n.server[p] = s.Name
	}
	sort.SliceStable(n.prefixes, func(i, j int) bool { return len(n.prefixes[i]) > len(n.prefixes[j]) })
	return n
}

// name returns the server and tool of a CLI tool name; server is "" for the
// CLI's own tools (read_file, run_shell_command, …), whose name is kept as
// it is.
func (n *toolNamer) name(cli string) (server, tool string) {
	for _, p := range n.prefixes {
		if t, ok := strings.CutPrefix(cli, p); ok && t != "" {
			return n.server[p], t
		}
	}
	return "", cli
}
