package eval

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem with a config file.
type Error struct {
	// File is the config's path as given to Load.
	File string
	// Path locates the problem inside the config, in the form
	// variants.terse.servers[1]; empty when it concerns the whole file.
	Path string
	// Line and Col are 1-based and point at the key (or list item) the
	// problem is about; zero when unknown.
	Line, Col int
	// Msg says what is wrong and, where it can, what to write instead.
	Msg string
}

// Error formats e as "FILE:LINE:COL: PATH: message", leaving out the parts
// that are unknown.
func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors are all the problems Load found in one file, sorted by path. Load
// returns a non-empty Errors as its error.
type Errors []Error

// Error lists the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sortErrors orders es by path (numbers in a path compare as numbers, so
// servers[2] comes before servers[10]), then by message, and drops exact
// duplicates.
func sortErrors(es Errors) Errors {
	slices.SortStableFunc(es, func(a, b Error) int {
		if c := naturalCompare(sortKey(a.Path), sortKey(b.Path)); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
	return slices.Compact(es)
}

// sortKey rewrites a path so that keys and indexes compare alike, whether
// written servers.a, servers["a b"] or servers[1]. The separator sorts
// before every character a name can hold.
func sortKey(path string) string {
	return strings.NewReplacer(`["`, "\x00", `"]`, "", "[", "\x00", "]", "", ".", "\x00").Replace(path)
}

// naturalCompare compares a and b, treating runs of digits as numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da != "" && db != "" {
			na, _ := strconv.ParseUint(da, 10, 64)
			nb, _ := strconv.ParseUint(db, 10, 64)
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// formatPath renders a location inside root as a readable path: keys joined
// with dots, list indexes in brackets, and keys that are not plain names
// quoted (variants["v1.2"].model). Tokens past the end of root are keys.
func formatPath(root any, tokens []string) string {
	var b strings.Builder
	cur := root
	for _, tok := range tokens {
		switch v := cur.(type) {
		case []any:
			b.WriteString("[" + tok + "]")
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				cur = nil
			} else {
				cur = v[i]
			}
			continue
		case map[string]any:
			cur = v[tok]
		default:
			cur = nil
		}
		if plainName(tok) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		} else {
			b.WriteString("[" + strconv.Quote(tok) + "]")
		}
	}
	return b.String()
}

// plainName reports whether a key can be written bare in a path.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		ok := r == '_' || r == '-' || r == '$' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
