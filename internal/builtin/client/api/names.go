package api

import (
	"fmt"
	"regexp"

	"github.com/mst-eval/mst/internal/ground/toolname"

	"github.com/mst-eval/mst/servers"
)

// maxToolName is the longest tool name both Anthropic and OpenAI accept.
const maxToolName = 64

var validToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// toolRef is where a name offered to the model leads.
type toolRef struct {
	conn *servers.Conn
	tool servers.Tool
}

// nameTools gives every tool a name providers accept, unique across
// servers, and returns the map from offered name back to the tool. A valid,
// unique name is kept as it is; an invalid one is sanitized; a name that two
// servers share is prefixed with the server's name for the second server.
func nameTools(conns []*servers.Conn) ([]string, map[string]toolRef) {
	var names []string
	refs := map[string]toolRef{}
	for _, c := range conns {
		for _, t := range c.Tools {
			base := t.Name
			if !validToolName.MatchString(base) {
				base = sanitize(base)
			}
			name := base
			if _, taken := refs[name]; taken {
				name = truncate(sanitize(c.Server.Name) + "__" + base)
			}
			for i := 2; ; i++ {
				if _, taken := refs[name]; !taken {
					break
				}
				suffix := fmt.Sprintf("_%d", i)
				name = truncate(base[:min(len(base), maxToolName-len(suffix))] + suffix)
			}
			refs[name] = toolRef{conn: c, tool: t}
			names = append(names, name)
		}
	}
	return names, refs
}

// sanitize replaces each run of characters providers refuse with one "_"
// and cuts the result to the length they accept.
func sanitize(name string) string {
	s := toolname.Clean(name)
	if s == "" {
		s = "tool"
	}
	return truncate(s)
}

func truncate(s string) string {
	if len(s) > maxToolName {
		return s[:maxToolName]
	}
	return s
}
