package inputcheck

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// JSONSyntax words a syntax error of encoding/json (its message msg, at
// byte offset off of data) in MST's terms, saying what to change.
func JSONSyntax(data []byte, off int64, msg string) string {
	found := ""
	if q := strings.Index(msg, "invalid character "); q >= 0 {
		rest := msg[q+len("invalid character "):]
		if end := strings.Index(rest[1:], "' "); strings.HasPrefix(rest, "'") && end >= 0 {
			found = rest[1 : end+1]
		}
	}
	if found == `\'` {
		found = "'"
	}
	// The offset of a syntax error is just past the offending byte.
	at := int(min(max(off, 1), int64(len(data)))) - 1
	prev := byte(0)
	if i := bytes.LastIndexFunc(data[:max(at, 0)], func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) }); i >= 0 {
		prev = data[i]
	}
	what := "found " + foundWord(found)
	switch {
	case strings.Contains(msg, "looking for beginning of object key string"):
		if prev == ',' && found == "}" {
			return "a comma before } : JSON allows no comma after the last key; remove it"
		}
		return "expected a key in double quotes, " + what
	case strings.Contains(msg, "looking for beginning of value"):
		if prev == ',' && found == "]" {
			return "a comma before ] : JSON allows no comma after the last item; remove it"
		}
		if found == "'" {
			return "expected a value, found a single quote: JSON strings take double quotes"
		}
		return "expected a value (a string in double quotes, a number, true, false, null, an object or a list), " + what
	case strings.Contains(msg, "after object key:value pair"):
		return "expected , or } after the value, " + what + " (is a comma missing?)"
	case strings.Contains(msg, "after array element"):
		return "expected , or ] after the list item, " + what + " (is a comma missing?)"
	case strings.Contains(msg, "after object key"):
		return "expected : after the key, " + what
	case strings.Contains(msg, "in string literal"):
		return "a control character (such as a tab or a line break) inside a string: write it as an escape such as \\t or \\n"
	case strings.Contains(msg, "in string escape code"):
		return `an invalid escape in a string: use \", \\, \/, \b, \f, \n, \r, \t or \uXXXX`
	case strings.Contains(msg, "in \\u hexadecimal character escape"):
		return `an invalid \u escape: write four hexadecimal digits, as in \u00e9`
	case strings.Contains(msg, "in numeric literal"), strings.Contains(msg, "after decimal point"), strings.Contains(msg, "in exponent"):
		return "an invalid number, " + what
	case strings.Contains(msg, "in literal"):
		return "an unknown word: a string takes double quotes; the words JSON knows are true, false and null"
	case strings.Contains(msg, "after top-level value"):
		return "unexpected text after the end of the JSON value, " + what
	case strings.Contains(msg, "unexpected end of JSON input"):
		return "unexpected end of file (a bracket or quote is not closed)"
	}
	return "invalid JSON, " + what
}

func foundWord(c string) string {
	switch c {
	case "":
		return "something else"
	case `\n`, "\n":
		return "a line break"
	case `\t`, "\t":
		return "a tab"
	}
	if strings.HasPrefix(c, `\x`) || strings.HasPrefix(c, `\u`) {
		return "a control character"
	}
	return "'" + c + "'"
}

// YAMLSyntax words a YAML parser's message msg about the line line (1-based)
// of data in MST's terms, saying what to change. It looks at the line and
// the one before for what the parser does not name (a tab in the
// indentation, the most common mistake; a byte order mark inside the
// file; a carriage return alone), then maps the parser's messages to
// MST's; a message it does not know gets a general one. The parser's own
// words never reach the user.
func YAMLSyntax(data []byte, line int, msg string) string {
	if text, ok := lineOf(data, line); ok {
		indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
		if strings.Contains(indent, "\t") {
			return "a tab in the indentation: YAML indents with spaces only; replace the tab with spaces"
		}
	}
	for _, l := range []int{line, line - 1} {
		text, ok := lineOf(data, l)
		if !ok {
			continue
		}
		if strings.ContainsRune(text, '\ufeff') {
			return "a byte order mark (U+FEFF, an invisible character) inside the file: delete it; only the very start of a file may hold one"
		}
		if i := strings.IndexByte(text, '\r'); i >= 0 && i < len(text)-1 {
			return "a carriage return (\\r) that ends no line: save the file with Unix (LF) or Windows (CRLF) line ends"
		}
	}
	if m := escapeRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf(`an unknown escape \%s in a double-quoted string: write \\ for a backslash, or use single quotes ('...'), inside which a backslash is only a backslash`, m[1])
	}
	if m := reservedRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("a value that starts with %s, which YAML keeps for later use: put the value in quotes", m[1])
	}
	if strings.Contains(msg, "'\t'") || strings.Contains(msg, `'\t'`) {
		return "a tab where YAML does not allow one: indent and separate with spaces"
	}
	if m := dupKeyRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("key %s is given twice (first on line %s)", m[1], m[2])
	}
	for _, t := range yamlWords {
		if strings.Contains(msg, t.parser) {
			return t.mst
		}
	}
	return "YAML cannot read this line: check its indentation (spaces only, lined up with the keys of the same object), its quotes and brackets, and the line before it"
}

var (
	dupKeyRE   = regexp.MustCompile(`mapping key (".*") already defined at \[(\d+):\d+\]`)
	escapeRE   = regexp.MustCompile(`unknown escape character '(.)'`)
	reservedRE = regexp.MustCompile(`'(.)' is a reserved character`)
)

// yamlWords are the parser's messages for the common mistakes, and MST's.
var yamlWords = []struct{ parser, mst string }{
	{"sequence end token ']' not found", "a list opened with [ is not closed with ]"},
	{"',' or ']' must be specified", "expected , or ] after the list item (is a comma or a ] missing?)"},
	{"could not find flow mapping end token '}'", "an object opened with { is not closed with }"},
	{"',' or '}' must be specified", "expected , or } after the value (is a comma or a } missing?)"},
	{"could not find '[' character corresponding to ']'", "a ] closes no list: remove it or add the [ it closes"},
	{"could not find '{' character corresponding to '}'", "a } closes no object: remove it or add the { it closes"},
	{"mapping value is not allowed in this context", "a colon where no key can start: quote text that holds \": \" (\"like: this\"), or check the indentation"},
	{"could not find alias value", "an alias (*name) that names no anchor (&name) before it"},
	{"undefined alias", "an alias (*name) that names no anchor (&name) before it"},
	{"unexpected key name", "a key where none can be: check the indentation of this line and the one before"},
	{"found an invalid key for this map", "a key where none can be: check the indentation of this line and the one before"},
	{"non-map value is specified", "a value where a key was expected: check the indentation"},
	{"could not find value for mapping key", "a key with no value after it"},
	{"could not find map value", "a key with no value after it"},
	{"value cannot be placed after document separator", "text after --- on the same line"},
	{"end character of single-quoted text", "a single quote (') is not closed: add the closing quote; inside single quotes, write '' for a quote"},
	{"end character of double-quoted text", `a double quote (") is not closed: add the closing quote; inside double quotes, write \" for a quote`},
	{"map key-value is pre-defined", "more text after a value on the same line, or a quote left open on a line above (quoted text runs on to the next quote): close the quote, or put the whole value in quotes"},
	{"value is not allowed in this context", "a value where the indentation allows none: line this key up with the other keys of its object, and indent its value under it with spaces"},
	{"unexpected directive", "a line that starts with % (a YAML directive) inside the file: put a value that starts with % in quotes"},
	{"document not started", "a line that starts with % (a YAML directive) inside the file: put a value that starts with % in quotes"},
	{"unexpected scalar value type", "a value where none can be (a line starting with ? is a complex key, which configs and datasets do not use): check this line, and quote text that starts with ?"},
	{"unexpected map key", "a key where none can be: check the indentation of this line and the one before"},
	{"multi-line content", "a | or > (the start of a block of text) with no text under it: indent the text below it, or quote a value that is | or >"},
	{"surrogate", `a \u escape that is half of a UTF-16 pair and stands for no character: the text would not be valid UTF-8`},
}

func lineOf(data []byte, line int) (string, bool) {
	if line < 1 {
		return "", false
	}
	for i := 1; i < line; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return "", false
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return string(data), true
}
