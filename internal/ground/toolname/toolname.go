// Package toolname holds the rules by which tool names are rewritten on
// their way to a model: the one MST's own clients use for a name model
// providers would refuse (Clean), so that the graders' did-you-mean can
// recognise a name written the way a client showed it to the model, and
// the one the Gemini CLI applies to MCP tools (Gemini), so that its
// client can map the names the CLI reports back to the servers' own.
package toolname

import "strings"

// Clean replaces each run of characters other than ASCII letters, digits,
// "_" and "-" with one "_", and trims "_" from both ends. It may return "".
func Clean(name string) string {
	var b strings.Builder
	under := false
	for _, r := range name {
		if r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
			under = r == '_'
			continue
		}
		if !under {
			b.WriteByte('_')
			under = true
		}
	}
	return strings.Trim(b.String(), "_")
}

// geminiMaxName is the Gemini CLI's longest tool name: a name past it is
// cut (Gemini).
const geminiMaxName = 63

// GeminiValid is the Gemini CLI's rule for a valid tool name, without its
// cut of long names: "mcp_" first unless name starts with it; then each
// character outside [A-Za-z0-9_.:-] becomes "_", one "_" per UTF-16 code
// unit as the CLI's JavaScript counts them, so a character beyond the
// Basic Multilingual Plane (an emoji) becomes "__"; then "_" first if the
// result does not start with a letter or "_".
func GeminiValid(name string) string {
	if !strings.HasPrefix(name, "mcp_") {
		name = "mcp_" + name
	}
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ':' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'):
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("__")
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if c := out[0]; !(c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')) {
		out = "_" + out
	}
	return out
}

// Gemini is the name under which the Gemini CLI offers the model tool of
// the MCP server named server, and reports the model's calls of it:
// GeminiValid of SERVER_TOOL, and, when that is longer than 63 characters,
// its first 30 and last 30 characters around "...".
func Gemini(server, tool string) string {
	name := GeminiValid(server + "_" + tool)
	if len(name) > geminiMaxName {
		name = name[:30] + "..." + name[len(name)-30:]
	}
	return name
}
