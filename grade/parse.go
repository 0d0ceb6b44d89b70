package grade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	suggestpkg "github.com/mst-eval/mst/internal/ground/suggest"
)

// Names of the graders, as spec keys.
const (
	keyAnswerContains = "answerContains"
	keyAnswerMatches  = "answerMatches"
	keyToolCalled     = "toolCalled"
	keyToolNotCalled  = "toolNotCalled"
	keyMaxToolCalls   = "maxToolCalls"
	keyJudge          = "judge"
)

// graderNames lists the spec keys in the order errors list them.
func graderNames() []string {
	return []string{keyAnswerContains, keyAnswerMatches, keyJudge, keyMaxToolCalls, keyToolCalled, keyToolNotCalled}
}

// Parse parses one grader spec of a built-in grader: a JSON object with
// exactly one key naming the grader. Its errors carry the path inside the
// spec ("toolCalled.arguments: must be an object") and no file name.
func Parse(spec json.RawMessage) (Grader, error) { return ParseIn(nil, spec) }

// ParseAll parses a list of specs of built-in graders. Its error names
// the index of the first bad spec: "[2]: unknown grader ...". An empty
// list gives no graders and no error.
func ParseAll(specs []json.RawMessage) ([]Grader, error) { return ParseAllIn(nil, specs) }

// ParseIn is Parse with the graders of reg, the built-in ones when reg is
// nil.
func ParseIn(reg *Registry, spec json.RawMessage) (Grader, error) {
	if reg == nil {
		reg = builtinRegistry()
	}
	keys, fields, err := object(spec)
	if err != nil {
		if errors.Is(err, errNotObject) {
			return nil, fmt.Errorf("a grader must be an object with one key, such as {%q: %q}, not %s",
				keyToolCalled, "get_forecast", kindOf(spec))
		}
		return nil, fmt.Errorf("reading grader: %w", err)
	}
	switch len(keys) {
	case 0:
		return nil, fmt.Errorf("empty grader: give one of %s", strings.Join(graderNames(), ", "))
	case 1:
	default:
		return nil, fmt.Errorf("exactly one grader key per entry, found %s; split them into separate entries", andList(keys))
	}
	d, err := reg.Lookup(keys[0])
	if err != nil {
		return nil, err
	}
	return d.New(fields[keys[0]])
}

// builtinName reports whether name is a built-in grader's.
func builtinName(name string) bool { return slices.Contains(graderNames(), name) }

func parseAnswerContains(v json.RawMessage) (Grader, error) {
	g := answerContains{}
	switch kindOf(v) {
	case "a string":
		if err := json.Unmarshal(v, &g.text); err != nil {
			return nil, fmt.Errorf("%s: %w", keyAnswerContains, err)
		}
	case "an object":
		f, err := fieldsOf(keyAnswerContains, v, "text", "ignoreCase")
		if err != nil {
			return nil, err
		}
		raw, ok := f["text"]
		if !ok {
			return nil, fmt.Errorf("%s.text: required (the text the answer must contain)", keyAnswerContains)
		}
		if g.text, err = stringField(keyAnswerContains+".text", raw); err != nil {
			return nil, err
		}
		if raw, ok := f["ignoreCase"]; ok {
			if kindOf(raw) != "a boolean" {
				return nil, fmt.Errorf("%s.ignoreCase: must be true or false, not %s", keyAnswerContains, kindOf(raw))
			}
			g.ignoreCase = bytes.Equal(bytes.TrimSpace(raw), []byte("true"))
		}
	default:
		return nil, fmt.Errorf("%s: must be a string or an object like {\"text\": \"…\", \"ignoreCase\": true}, not %s",
			keyAnswerContains, kindOf(v))
	}
	if g.text == "" {
		return nil, fmt.Errorf("%s: the text must not be empty (every answer contains it)", keyAnswerContains)
	}
	if g.ignoreCase {
		// Simple Unicode case folding, as (?i) does in RE2.
		g.folded = regexp.MustCompile("(?i)" + regexp.QuoteMeta(g.text))
	}
	return g, nil
}

func parseAnswerMatches(v json.RawMessage) (Grader, error) {
	pattern, err := stringField(keyAnswerMatches, v)
	if err != nil {
		return nil, err
	}
	if pattern == "" {
		return nil, fmt.Errorf("%s: the regular expression must not be empty (it matches every answer)", keyAnswerMatches)
	}
	re, err := regexp.Compile(literalLabels(pattern))
	if err != nil {
		return nil, fmt.Errorf("%s: %s", keyAnswerMatches, describeRegexpError(pattern, err))
	}
	return answerMatches{re: re}, nil
}

// redactedLabel is the label redaction leaves where a secret value was,
// unescaped in a regular expression.
var redactedLabel = regexp.MustCompile(`\\?\[redacted:[A-Za-z_][A-Za-z0-9_]*\]`)

// literalLabels escapes every [redacted:NAME] label in a pattern, so it
// matches the label itself: a pattern whose secret value was redacted
// still matches the redacted answer, rather than turning into a character
// class. A label already escaped (\[redacted:NAME\]) is left alone.
func literalLabels(pattern string) string {
	return redactedLabel.ReplaceAllStringFunc(pattern, func(m string) string {
		if strings.HasPrefix(m, `\`) {
			return m
		}
		return regexp.QuoteMeta(m)
	})
}

// describeRegexpError explains a compile error of pattern in words, with the
// position of the fault when it can be found.
func describeRegexpError(pattern string, err error) string {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return fmt.Sprintf("invalid regular expression %q: %v", pattern, err)
	}
	msg := fmt.Sprintf("invalid regular expression %q: %s", pattern, se.Code)
	switch {
	case se.Code == syntax.ErrTrailingBackslash:
		msg += " at the end; write \\\\ for a literal backslash"
	case se.Expr != "" && se.Expr != pattern:
		if i := strings.Index(pattern, se.Expr); i >= 0 {
			msg += fmt.Sprintf(" at character %d (%q)", utf8.RuneCountInString(pattern[:i])+1, se.Expr)
		} else {
			msg += fmt.Sprintf(" in %q", se.Expr)
		}
	}
	for _, look := range []string{"(?=", "(?!", "(?<=", "(?<!"} {
		if strings.Contains(pattern, look) {
			msg += "; lookahead and lookbehind are not supported"
			break
		}
	}
	return msg + " (the syntax is Go's RE2: https://pkg.go.dev/regexp/syntax)"
}

func parseToolCalled(v json.RawMessage) (Grader, error) {
	g := toolCalled{}
	switch kindOf(v) {
	case "a string":
		var err error
		if g.tool, err = stringField(keyToolCalled, v); err != nil {
			return nil, err
		}
		if g.tool == "" {
			return nil, fmt.Errorf("%s: the tool name must not be empty", keyToolCalled)
		}
	case "an object":
		f, err := fieldsOf(keyToolCalled, v, "tool", "server", "arguments")
		if err != nil {
			return nil, err
		}
		if g.tool, g.server, err = toolAndServer(keyToolCalled, f); err != nil {
			return nil, err
		}
		if raw, ok := f["arguments"]; ok {
			if kindOf(raw) != "an object" {
				return nil, fmt.Errorf("%s.arguments: must be an object, not %s", keyToolCalled, kindOf(raw))
			}
			args, err := decodeValue(raw)
			if err != nil {
				return nil, fmt.Errorf("%s.arguments: %w", keyToolCalled, err)
			}
			g.args = args.(map[string]any)
		}
	default:
		return nil, fmt.Errorf("%s: must be a tool name or an object like {\"tool\": \"…\", \"server\": \"…\", \"arguments\": {…}}, not %s",
			keyToolCalled, kindOf(v))
	}
	return g, nil
}

func parseToolNotCalled(v json.RawMessage) (Grader, error) {
	g := toolNotCalled{}
	switch kindOf(v) {
	case "a string":
		var err error
		if g.tool, err = stringField(keyToolNotCalled, v); err != nil {
			return nil, err
		}
		if g.tool == "" {
			return nil, fmt.Errorf("%s: the tool name must not be empty", keyToolNotCalled)
		}
	case "an object":
		f, err := fieldsOf(keyToolNotCalled, v, "tool", "server")
		if err != nil {
			return nil, err
		}
		if g.tool, g.server, err = toolAndServer(keyToolNotCalled, f); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: must be a tool name or an object like {\"tool\": \"…\", \"server\": \"…\"}, not %s",
			keyToolNotCalled, kindOf(v))
	}
	return g, nil
}

// toolAndServer reads the tool (required) and server (optional) fields of
// the object form of toolCalled and toolNotCalled.
func toolAndServer(key string, f map[string]json.RawMessage) (tool, server string, err error) {
	raw, ok := f["tool"]
	if !ok {
		return "", "", fmt.Errorf("%s.tool: required (the name of the tool)", key)
	}
	if tool, err = stringField(key+".tool", raw); err != nil {
		return "", "", err
	}
	if tool == "" {
		return "", "", fmt.Errorf("%s.tool: must not be empty", key)
	}
	if raw, ok := f["server"]; ok {
		if server, err = stringField(key+".server", raw); err != nil {
			return "", "", err
		}
		if server == "" {
			return "", "", fmt.Errorf("%s.server: must not be empty; leave it out to accept any server", key)
		}
	}
	return tool, server, nil
}

func parseMaxToolCalls(v json.RawMessage) (Grader, error) {
	bad := fmt.Errorf("%s: must be a whole number of 0 or more, such as 5, not %s", keyMaxToolCalls, describe(v))
	if kindOf(v) != "a number" {
		return nil, bad
	}
	f, ok := new(big.Float).SetString(string(bytes.TrimSpace(v)))
	if !ok || !f.IsInt() || f.Sign() < 0 {
		return nil, bad
	}
	n, acc := f.Int64()
	if acc != big.Exact || n > math.MaxInt32 {
		return nil, fmt.Errorf("%s: %s is too large", keyMaxToolCalls, describe(v))
	}
	return maxToolCalls{max: int(n)}, nil
}

// errNotObject reports that a JSON value is not an object.
var errNotObject = errors.New("not an object")

// object reads a JSON object, keeping the order of its keys. It rejects a
// key given twice, since the second would silently win.
func object(raw json.RawMessage) ([]string, map[string]json.RawMessage, error) {
	if kindOf(raw) != "an object" {
		return nil, nil, errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	var keys []string
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if _, dup := fields[key]; dup {
			return nil, nil, fmt.Errorf("key %q appears twice", key)
		}
		keys = append(keys, key)
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("unexpected data after the object")
	}
	return keys, fields, nil
}

// fieldsOf reads the object at path and rejects keys not in known.
func fieldsOf(path string, raw json.RawMessage, known ...string) (map[string]json.RawMessage, error) {
	keys, fields, err := object(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range keys {
		if !contains(known, k) {
			if s := suggest(k, known); s != "" {
				return nil, fmt.Errorf("%s.%s: unknown field (did you mean %s?)", path, k, s)
			}
			return nil, fmt.Errorf("%s.%s: unknown field (known: %s)", path, k, strings.Join(known, ", "))
		}
	}
	return fields, nil
}

// stringField decodes a JSON string at path.
func stringField(path string, raw json.RawMessage) (string, error) {
	if kindOf(raw) != "a string" {
		return "", fmt.Errorf("%s: must be a string, not %s", path, kindOf(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// decodeValue decodes any JSON value, keeping numbers as json.Number so they
// compare exactly.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the value")
	}
	return v, nil
}

// kindOf names the kind of a JSON value with its article, for messages.
func kindOf(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// describe names a JSON value for a message: numbers as themselves, the
// rest by kind.
func describe(raw json.RawMessage) string {
	if kindOf(raw) == "a number" {
		return string(bytes.TrimSpace(raw))
	}
	return kindOf(raw)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// andList joins names as "a, b and c".
func andList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// suggest returns the known name closest to s, or "" when none is close
// enough to be a likely typo.
func suggest(s string, known []string) string {
	if c := suggestpkg.Closest(s, known); len(c) > 0 {
		return c[0]
	}
	return ""
}

// sortedKeys returns the keys of m in byte order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
