// Package toolname holds the one rule by which MST's clients rewrite a tool
// name that model providers would refuse, so that the graders' did-you-mean
// can recognise a name written the way a client showed it to the model.
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
