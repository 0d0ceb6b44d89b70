package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
)

// reader reads one file, collecting its cases, the ids it saw and its
// problems.
type reader struct {
	file  string
	cases []Case
	ids   []located
	errs  Errors
}

func (r *reader) fail(line int, id, msg string) {
	r.errs = append(r.errs, Error{File: r.file, Line: line, Case: id, Msg: msg})
}

// problem records a finding of inputcheck.
func (r *reader) problem(p *inputcheck.Problem) {
	r.fail(p.Line, "", fmt.Sprintf("column %d: %s", p.Col, p.Msg))
}

// readFile reads the file at path, the name its errors and its cases'
// Sources give, in format f: the one way from a case file to its cases,
// for a path in a config (f chosen by the extension) and for a format's
// definition (Formats). A nil f is a name with none of MST's extensions,
// told once the file is read, so a missing file is told as missing.
func readFile(path string, f *format) *reader {
	r := &reader{file: path}
	data, err := inputcheck.ReadFile(r.file, inputcheck.MaxDatasetBytes)
	switch {
	case errors.Is(err, inputcheck.ErrTooLarge):
		r.fail(0, "", err.Error()+" in a dataset; split the cases over several files")
		return r
	case errors.Is(err, fs.ErrNotExist):
		r.fail(0, "", "no such file")
		return r
	case err != nil:
		if st, serr := os.Stat(r.file); serr == nil && st.IsDir() {
			r.fail(0, "", "is a folder, not a case file")
			return r
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		r.fail(0, "", fmt.Sprintf("cannot read the file: %v", err))
		return r
	}
	r.readAs(f, data)
	return r
}

// readPath reads the file at path in the format its extension names.
func readPath(path string) *reader { return readFile(path, formatOf(path)) }

// readData reads the cases of the file's content, in the format its name
// says.
func (r *reader) readData(data []byte) { r.readAs(formatOf(r.file), data) }

// readAs reads the cases of the file's content in format f (nil: the
// file's name has none of MST's extensions).
func (r *reader) readAs(f *format, data []byte) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if p := inputcheck.Text(data, "dataset"); p != nil {
		r.problem(p)
		return
	}
	if f == nil {
		r.fail(0, "", unsupported(r.file))
		return
	}
	f.parse(r, data)
	if len(r.cases) == 0 && len(r.errs) == 0 {
		r.fail(0, "", "holds no cases")
	}
}

// caseKeys lists the keys of a case object.
func caseKeys() []string {
	return []string{"id", "input", "expect", "metadata", "model", "clientOptions"}
}

// addObject checks one case given as an object of JSON values and keeps it
// when it has no problems.
func (r *reader) addObject(v any, line int) {
	obj, ok := v.(map[string]any)
	if !ok {
		r.fail(line, "", "a case must be an object with id and input, got "+describe(v))
		return
	}
	c := Case{Source: fmt.Sprintf("%s:%d", r.file, line)}
	problems := badUTF8(obj, "")
	if len(problems) > 0 {
		r.keep(c, line, problems)
		return
	}
	idv, hasID := obj["id"]
	switch v := idv.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			problems = append(problems, "id is blank")
		} else {
			c.ID = v
		}
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			c.ID = strconv.FormatInt(n, 10)
		} else {
			problems = append(problems, "id must be a string or a whole number, got "+describe(v))
		}
	default:
		if hasID {
			problems = append(problems, "id must be a string or a whole number, got "+describe(v))
		} else {
			problems = append(problems, "missing id")
		}
	}
	var unknown []string
	for k := range obj {
		if !slices.Contains(caseKeys(), k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		problems = append(problems, fmt.Sprintf("unknown key %q%s", k, didYouMean(k, caseKeys())))
	}
	switch in, has := obj["input"]; s := in.(type) {
	case string:
		if strings.TrimSpace(s) == "" {
			problems = append(problems, "input is blank")
		}
		c.Input = s
	default:
		if has {
			problems = append(problems, "input must be a string, got "+describe(in))
		} else {
			problems = append(problems, "missing input")
		}
	}
	if ev, has := obj["expect"]; has {
		list, isList := ev.([]any)
		if !isList {
			list = []any{ev}
		}
		for i, g := range list {
			if _, ok := g.(map[string]any); !ok {
				where := "expect"
				if isList {
					where = fmt.Sprintf("expect[%d]", i)
				}
				problems = append(problems, fmt.Sprintf(`%s must be a grader object such as {"answerContains": "…"}, got %s`, where, describe(g)))
				continue
			}
			raw, err := marshal(g)
			if err != nil {
				problems = append(problems, fmt.Sprintf("expect: %v", err))
				continue
			}
			c.Expect = append(c.Expect, raw)
		}
	}
	if mv, has := obj["model"]; has {
		if m, ok := mv.(string); ok && strings.TrimSpace(m) != "" {
			c.Model = m
		} else {
			problems = append(problems, "model must be a model reference such as anthropic/claude-sonnet-4-5, got "+describe(mv))
		}
	}
	if ov, has := obj["clientOptions"]; has {
		if _, ok := ov.(map[string]any); !ok {
			problems = append(problems, "clientOptions must be an object, got "+describe(ov))
		} else if raw, err := marshal(ov); err != nil {
			problems = append(problems, fmt.Sprintf("clientOptions: %v", err))
		} else {
			c.ClientOptions = raw
		}
	}
	if mv, has := obj["metadata"]; has {
		m, ok := mv.(map[string]any)
		if !ok {
			problems = append(problems, "metadata must be an object, got "+describe(mv))
		} else if len(m) > 0 {
			c.Metadata = m
		}
	}
	r.keep(c, line, problems)
}

// keep records a case's id and problems, and the case itself when it has
// none.
func (r *reader) keep(c Case, line int, problems []string) {
	if c.ID != "" {
		r.ids = append(r.ids, located{id: c.ID, file: r.file, line: line})
	}
	for _, p := range problems {
		r.fail(line, c.ID, p)
	}
	if len(problems) == 0 {
		r.cases = append(r.cases, c)
	}
}

// describe words a JSON value for "got …".
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "an empty value (null)"
	case string:
		if r := []rune(v); len(r) > 40 {
			v = string(r[:37]) + "..."
		}
		return fmt.Sprintf("string %q", v)
	case json.Number:
		return "number " + string(v)
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%v", v)
}

// marshal encodes v as compact JSON, leaving <, > and & as they are.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// badUTF8 lists the keys and strings under v (at path) that are not valid
// UTF-8: a YAML escape such as "\xff" makes one, and it must not be
// replaced silently.
func badUTF8(v any, path string) []string {
	const fix = " (an escape such as \\xff makes a byte that is no character): write the text as UTF-8"
	switch v := v.(type) {
	case string:
		if !utf8.ValidString(v) {
			return []string{path + ": invalid UTF-8" + fix}
		}
	case map[string]any:
		var out []string
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if !utf8.ValidString(k) {
				out = append(out, fmt.Sprintf("%s: invalid UTF-8 in a key%s", strings.ToValidUTF8(p, "\ufffd"), fix))
				continue
			}
			out = append(out, badUTF8(v[k], p)...)
		}
		return out
	case []any:
		var out []string
		for i, x := range v {
			out = append(out, badUTF8(x, fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	return nil
}
