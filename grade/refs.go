package grade

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/ground/toolname"

	suggestpkg "github.com/mst-eval/mst/internal/ground/suggest"
)

// Ref is a tool a grader names: Tool on Server, or on any server of the
// variant when Server is empty. Tool is the tool's name on its MCP server
// (what transcripts record), not a name a client made up for the model.
type Ref struct {
	// Grader is the grader's spec key ("toolNotCalled").
	Grader string `json:"grader"`
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool"`
}

// Referrer is implemented by graders that name tools or servers. The
// readiness check refuses a run whose graders name one that no server of
// the variant has, since such a grader passes or fails every trial for a
// reason that has nothing to do with the client.
type Referrer interface {
	Refs() []Ref
}

// Refs returns what the graders of a list name, in order, for graders that
// implement Referrer.
func Refs(graders []Grader) []Ref {
	var out []Ref
	for _, g := range graders {
		if r, ok := g.(Referrer); ok {
			out = append(out, r.Refs()...)
		}
	}
	return out
}

func (g toolCalled) Refs() []Ref {
	return []Ref{{Grader: keyToolCalled, Server: g.server, Tool: g.tool}}
}

func (g toolNotCalled) Refs() []Ref {
	return []Ref{{Grader: keyToolNotCalled, Server: g.server, Tool: g.tool}}
}

// PlacedRef is a Ref with where its grader was declared, for the message
// that refuses it.
type PlacedRef struct {
	// At is where the grader is declared: "graders[1]", or
	// `cases.jsonl: case "oslo": expect[0]`.
	At string `json:"at"`
	Ref
}

// ServerTools is what one server of a variant has: the names of all the
// tools it lists, those the variant hides from the model included.
type ServerTools struct {
	Server string
	Tools  []string
}

// CheckRefs checks what a variant's graders name against the tools its
// servers list. Each ref that names a server the variant does not use, or
// a tool none of its servers (or not the named server) lists, gives one
// line of the error, with a did-you-mean when a name is close:
//
//	graders[1] toolNotCalled "delte_file": no server of variant v offers a tool delte_file (did you mean delete_file?)
//
// A tool the variant hides is still one its server has, so a grader may
// name it (toolNotCalled of a hidden tool is a fair check of an ablation).
func CheckRefs(variant string, refs []PlacedRef, have []ServerTools) error {
	var serverNames, all []string
	byServer := map[string][]string{}
	for _, s := range have {
		serverNames = append(serverNames, s.Server)
		byServer[s.Server] = s.Tools
		all = append(all, s.Tools...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	var errs []error
	seen := map[PlacedRef]bool{}
	for _, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		what := fmt.Sprintf("%s %s %s", r.At, r.Grader, strconv.Quote(r.Tool))
		if r.Server == "" {
			if !slices.Contains(all, r.Tool) {
				errs = append(errs, fmt.Errorf("%s: no server of variant %s offers a tool %s%s",
					what, variant, r.Tool, toolHint(r.Tool, all)))
			}
			continue
		}
		tools, ok := byServer[r.Server]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: variant %s has no server %s%s",
				what, variant, r.Server, suggestpkg.Hint(r.Server, serverNames)))
			continue
		}
		if !slices.Contains(tools, r.Tool) {
			hint := ""
			// The tool may be on another of the variant's servers.
			for _, s := range have {
				if s.Server != r.Server && slices.Contains(s.Tools, r.Tool) {
					hint = fmt.Sprintf(" (server %s has it)", s.Server)
					break
				}
			}
			if hint == "" {
				hint = toolHint(r.Tool, tools)
			}
			errs = append(errs, fmt.Errorf("%s: server %s of variant %s offers no tool %s%s",
				what, r.Server, variant, r.Tool, hint))
		}
	}
	return errors.Join(errs...)
}

// toolHint is a did-you-mean for a tool name. Besides close spellings it
// catches a name written as a client shows it to the model, such as
// Claude Code's "mcp__fs__delete_file" or the api client's "fs__delete_file":
// graders name the tool as its server does.
func toolHint(got string, tools []string) string {
	if s := suggestpkg.DidYouMean(got, tools); s != "" {
		return s
	}
	var prefixed []string
	for _, t := range tools {
		if strings.HasSuffix(got, "__"+t) || strings.HasSuffix(got, "__"+toolname.Clean(t)) || toolname.Clean(t) == got {
			prefixed = append(prefixed, t)
		}
	}
	if len(prefixed) > 0 {
		return " (did you mean " + strings.Join(prefixed, " or ") + "? name a tool as its server lists it)"
	}
	return suggestpkg.Hint(got, tools)
}
