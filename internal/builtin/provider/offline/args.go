package offline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// property is one property of a tool's input schema.
type property struct {
	name     string
	typ      string // the first type other than "null"; "" when none is given
	enum     []json.RawMessage
	required bool
}

// readSchema returns the properties of an object schema in the order the
// schema lists them.
func readSchema(raw json.RawMessage) ([]property, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("reading input schema: %w", err)
	}
	if len(s.Properties) == 0 || string(s.Properties) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("reading input schema: properties is not an object")
	}
	var props []property
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("reading input schema properties: %w", err)
		}
		name, _ := tok.(string)
		var ps struct {
			Type json.RawMessage   `json:"type"`
			Enum []json.RawMessage `json:"enum"`
		}
		if err := dec.Decode(&ps); err != nil {
			return nil, fmt.Errorf("reading input schema property %q: %w", name, err)
		}
		props = append(props, property{
			name:     name,
			typ:      schemaType(ps.Type),
			enum:     ps.Enum,
			required: slices.Contains(s.Required, name),
		})
	}
	return props, nil
}

// schemaType reads a JSON Schema "type", a string or a list of strings, and
// returns the first type that is not "null".
func schemaType(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	for _, t := range many {
		if t != "null" {
			return t
		}
	}
	return ""
}

// filler gives the properties of one tool call their values, taking each
// value from the prompt at most once while another is left.
type filler struct {
	p           prompt
	nextNumber  int             // index of the first number not used yet
	usedStrings map[string]bool // lowercased string and enum values already given
}

// arguments builds the JSON object of arguments for props from p.
func arguments(props []property, p prompt) json.RawMessage {
	f := filler{p: p, usedStrings: map[string]bool{}}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, prop := range props {
		v, ok := f.value(prop)
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(prop.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(v)
		n++
	}
	b.WriteByte('}')
	return b.Bytes()
}

// value returns the JSON value of one property, or false to leave it out.
func (f *filler) value(prop property) (json.RawMessage, bool) {
	if len(prop.enum) > 0 {
		if v, ok := f.enumValue(prop.enum); ok {
			return v, true
		}
		return prop.enum[0], prop.required
	}
	switch prop.typ {
	case "integer", "number":
		if f.nextNumber < len(f.p.numbers) {
			n := f.p.numbers[f.nextNumber]
			f.nextNumber++
			if prop.typ == "integer" {
				n = math.Trunc(n)
			}
			return mustMarshal(n), true
		}
		return json.RawMessage("0"), prop.required
	case "boolean":
		return json.RawMessage("false"), prop.required
	case "object":
		return json.RawMessage("{}"), prop.required
	case "array":
		return json.RawMessage("[]"), prop.required
	}
	if s, ok := f.stringValue(prop.required); ok {
		return mustMarshal(s), true
	}
	return nil, false
}

// enumValue returns the unused enum value that appears earliest in the
// prompt.
func (f *filler) enumValue(enum []json.RawMessage) (json.RawMessage, bool) {
	best, bestAt := -1, len(f.p.words)
	for i, raw := range enum {
		text := enumText(raw)
		if f.usedStrings[strings.ToLower(text)] {
			continue
		}
		if at := f.find(text); at >= 0 && at < bestAt {
			best, bestAt = i, at
		}
	}
	if best < 0 {
		return nil, false
	}
	f.usedStrings[strings.ToLower(enumText(enum[best]))] = true
	return enum[best], true
}

// enumText is the text of an enum value: a string's content, or the JSON
// text of any other value.
func enumText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// find returns the index of the first prompt word where the words of text
// appear in a row (compared lowercased and stemmed), or -1.
func (f *filler) find(text string) int {
	want := scanWords(text)
	if len(want) == 0 {
		return -1
	}
	words := f.p.words
	for i := 0; i+len(want) <= len(words); i++ {
		match := true
		for j, w := range want {
			if words[i+j].key != w.key {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// stringValue returns the first unused string candidate; a required
// property falls back to the last content word of the prompt and then to a
// candidate already used.
func (f *filler) stringValue(required bool) (string, bool) {
	for _, s := range f.p.strings {
		if !f.usedStrings[strings.ToLower(s)] {
			f.usedStrings[strings.ToLower(s)] = true
			return s, true
		}
	}
	if !required {
		return "", false
	}
	if f.p.last != "" && !f.usedStrings[strings.ToLower(f.p.last)] {
		f.usedStrings[strings.ToLower(f.p.last)] = true
		return f.p.last, true
	}
	if len(f.p.strings) > 0 {
		return f.p.strings[0], true
	}
	return f.p.last, true
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only strings and finite numbers reach here; both always marshal.
		panic(err)
	}
	return b
}
