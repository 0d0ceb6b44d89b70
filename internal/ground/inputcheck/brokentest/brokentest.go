// Package brokentest makes broken input files for tests of MST's loaders:
// from one valid YAML, JSON or CSV text it derives, line by line and byte
// by byte, the mistakes people and attackers make (tabs, bad indentation,
// unclosed quotes and brackets, duplicate keys, stray colons, binary
// bytes, a BOM, document separators, aliases to nothing, files cut
// short), and it says whether a loader's message still shows the raw
// words of a parser instead of MST's own.
package brokentest

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// File is one broken input.
type File struct {
	// Name says what was broken, for a test's failure message.
	Name string
	Data []byte
}

// RawPhrases are words only a parser's own message holds. A message MST
// shows for a broken file must contain none of them.
// The check of "yaml:" (the prefix of the parsers' errors) is apart: a
// file name such as eval.yaml: may hold it.
var RawPhrases = []string{
	"[yaml]", "did not find expected", "mapping values are not allowed",
	"mapping value is not allowed", "value is not allowed in this context", "invalid character",
	"looking for beginning", "unexpected EOF", "unexpected end of JSON input", "could not find",
	"must be specified", "unexpected token", "parse error", "bare \" in non-quoted-field",
	"extraneous or missing \" in quoted-field", "wrong number of fields", "\n>",
	"sequence was used where mapping is expected", "unexpected key name", "found an invalid key",
	"non-map value", "cannot start any token", "found character that cannot", "reserved character",
	"unexpected directive", "document not started", "unexpected scalar", "unexpected map key",
	"found unknown escape character", "multi-line content", "pre-defined", "invalid YAML:", "invalid CSV:",
}

var yamlPrefix = regexp.MustCompile(`(^|[^.\w])yaml:`)

// Raw returns the first raw parser phrase in msg, or "".
func Raw(msg string) string {
	if yamlPrefix.MatchString(msg) {
		return "yaml:"
	}
	for _, p := range RawPhrases {
		if strings.Contains(msg, p) {
			return p
		}
	}
	return ""
}

// lineEdits are the changes made to each line of a YAML text.
var lineEdits = []struct {
	name string
	edit func(line string) string
}{
	{"tab indent", func(l string) string { return "\t" + strings.TrimLeft(l, " ") }},
	{"tab after indent", func(l string) string { return indent(l) + "\t" + strings.TrimLeft(l, " ") }},
	{"one more space", func(l string) string { return " " + l }},
	{"three more spaces", func(l string) string { return "   " + l }},
	{"one less space", func(l string) string { return strings.TrimPrefix(l, " ") }},
	{"no indent", func(l string) string { return strings.TrimLeft(l, " ") }},
	{"unclosed double quote", func(l string) string { return l + ` "open` }},
	{"unclosed single quote", func(l string) string { return l + ` 'open` }},
	{"quote in the middle", func(l string) string { return strings.Replace(l, ": ", `: "x" y`, 1) }},
	{"unclosed [", func(l string) string { return l + " [a, b" }},
	{"unclosed {", func(l string) string { return l + " {a: b" }},
	{"stray ]", func(l string) string { return l + " ]" }},
	{"stray }", func(l string) string { return l + " }" }},
	{"stray colon", func(l string) string { return l + ": x" }},
	{"colon without space", func(l string) string { return strings.Replace(l, ": ", ":", 1) }},
	{"second colon", func(l string) string { return strings.Replace(l, ": ", ": a: ", 1) }},
	{"alias to nothing", func(l string) string { return strings.Replace(l, ": ", ": *nowhere ", 1) }},
	{"anchor twice", func(l string) string { return strings.Replace(l, ": ", ": &a &b ", 1) }},
	{"unknown tag", func(l string) string { return strings.Replace(l, ": ", ": !!nonsense ", 1) }},
	{"document separator", func(l string) string { return "---\n" + l }},
	{"separator with text", func(l string) string { return "--- x: y\n" + l }},
	{"document end", func(l string) string { return "...\n" + l }},
	{"directive", func(l string) string { return "%YAML 1.1\n" + l }},
	{"list item", func(l string) string { return indent(l) + "- " + strings.TrimLeft(l, " ") }},
	{"complex key", func(l string) string { return indent(l) + "? " + strings.TrimLeft(l, " ") }},
	{"reserved @", func(l string) string { return strings.Replace(l, ": ", ": @x", 1) }},
	{"reserved backquote", func(l string) string { return strings.Replace(l, ": ", ": `x", 1) }},
	{"block scalar", func(l string) string { return strings.Replace(l, ": ", ": |\n", 1) }},
	{"bad escape", func(l string) string { return l + ` "\q"` }},
	{"NUL byte", func(l string) string { return l + "\x00" }},
	{"invalid UTF-8", func(l string) string { return l + "\xff\xfe" }},
	{"BOM inside", func(l string) string { return l + "\ufeff" }},
	{"carriage return", func(l string) string { return l + "\r x" }},
	{"control character", func(l string) string { return l + "\x07" }},
	{"duplicated", func(l string) string { return l + "\n" + l }},
	{"percent", func(l string) string { return "%" + l }},
}

func indent(l string) string { return l[:len(l)-len(strings.TrimLeft(l, " "))] }

// YAML returns broken versions of the valid YAML text valid: each line
// edit applied to each line, the text cut short at every line and in the
// middle of each, a BOM before it, and binary files.
func YAML(valid string) []File {
	lines := strings.Split(strings.TrimSuffix(valid, "\n"), "\n")
	var out []File
	for i := range lines {
		for _, e := range lineEdits {
			changed := append([]string(nil), lines...)
			changed[i] = e.edit(lines[i])
			out = append(out, File{fmt.Sprintf("%s on line %d", e.name, i+1), []byte(strings.Join(changed, "\n") + "\n")})
		}
		cut := strings.Join(lines[:i], "\n") + "\n" + lines[i][:len(lines[i])/2]
		out = append(out, File{fmt.Sprintf("cut in line %d", i+1), []byte(cut)})
	}
	return append(out, common(valid)...)
}

// JSON returns broken versions of the valid JSON text valid: cut short
// at every byte, each comma removed, a comma added before each closing
// bracket, each double quote made single or removed, each colon removed,
// a BOM, and binary files.
func JSON(valid string) []File {
	var out []File
	for i := 1; i < len(valid); i++ {
		out = append(out, File{fmt.Sprintf("cut to %d bytes", i), []byte(valid[:i])})
	}
	for i := 0; i < len(valid); i++ {
		c := valid[i]
		with := func(name, repl string) {
			out = append(out, File{fmt.Sprintf("%s at byte %d", name, i), []byte(valid[:i] + repl + valid[i+1:])})
		}
		switch c {
		case ',':
			with("comma removed", "")
			with("comma doubled", ",,")
		case '}', ']':
			with("trailing comma", ","+string(c))
			with("bracket removed", "")
		case '"':
			with("single quote", "'")
			with("quote removed", "")
		case ':':
			with("colon removed", "")
			with("colon doubled", "::")
		case '{', '[':
			with("bracket doubled", string(c)+string(c))
		}
	}
	for _, extra := range []string{"x", "}", "]", ",", "{}", "// comment", "/* c */"} {
		out = append(out, File{"text after the value: " + extra, []byte(valid + extra)})
	}
	for _, lit := range []string{"tru", "nul", "01", "1.", "1e", "-", "+1", "NaN", "Infinity", `"\x"`, `"\u12"`, "\"a\tb\"", "'a'", "undefined"} {
		out = append(out, File{"bad value " + lit, []byte(`{"id": ` + lit + `}`)})
	}
	return append(out, common(valid)...)
}

// CSV returns broken versions of the valid CSV text valid: a quote left
// open in each line, a bare quote in a field, extra and missing fields,
// and the common ones.
func CSV(valid string) []File {
	lines := strings.Split(strings.TrimSuffix(valid, "\n"), "\n")
	var out []File
	for i := range lines {
		edits := map[string]string{
			"open quote":         lines[i] + `,"open`,
			"bare quote":         strings.Replace(lines[i], ",", `,a"b`, 1),
			"text after a quote": strings.Replace(lines[i], ",", `,"a"b`, 1),
			"extra field":        lines[i] + ",extra",
			"missing field":      lines[i][:max(strings.LastIndex(lines[i], ","), 0)],
		}
		for name, line := range edits {
			changed := append([]string(nil), lines...)
			changed[i] = line
			out = append(out, File{fmt.Sprintf("%s on line %d", name, i+1), []byte(strings.Join(changed, "\n") + "\n")})
		}
	}
	return append(out, common(valid)...)
}

// common are the broken files of every format: a BOM before the text,
// the text with NUL bytes, invalid UTF-8, a binary file, and an empty
// file or one of white space.
func common(valid string) []File {
	return []File{
		{"BOM", append([]byte("\ufeff"), valid...)},
		{"two BOMs", append([]byte("\ufeff\ufeff"), valid...)},
		{"UTF-16", utf16(valid)},
		{"NUL bytes", bytes.ReplaceAll([]byte(valid), []byte("\n"), []byte("\x00\n"))},
		{"Latin-1", bytes.ReplaceAll([]byte(valid), []byte("e"), []byte("\xe9"))},
		{"binary", []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00")},
		{"gzip", []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xcbH\xcd\xc9\xc9\x07\x00")},
		{"empty", nil},
		{"white space", []byte(" \n\t\n")},
	}
}

func utf16(s string) []byte {
	out := []byte{0xff, 0xfe}
	for _, r := range s {
		out = append(out, byte(r), byte(r>>8))
	}
	return out
}
