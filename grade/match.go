package grade

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// matchArguments reports whether the arguments of a call (raw JSON) contain
// want, and when not, the first difference in words. Missing or null
// arguments count as an empty object.
func matchArguments(want map[string]any, raw json.RawMessage) (bool, string) {
	var got any = map[string]any{}
	if kindOf(raw) != "nothing" && kindOf(raw) != "null" {
		v, err := decodeValue(raw)
		if err != nil {
			return false, "its arguments are not valid JSON"
		}
		got = v
	}
	return matchValue("arguments", want, got)
}

// matchValue reports whether got matches want: objects by subset (every key
// of want, recursively), arrays element by element with the same length,
// numbers by numeric value, everything else by equality.
func matchValue(path string, want, got any) (bool, string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false, fmt.Sprintf("%s is %s, want an object", path, short(got))
		}
		for _, k := range sortedKeys(w) {
			gv, ok := g[k]
			p := join(path, k)
			if !ok {
				return false, fmt.Sprintf("%s is missing, want %s", p, short(w[k]))
			}
			if ok, why := matchValue(p, w[k], gv); !ok {
				return false, why
			}
		}
		return true, ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return false, fmt.Sprintf("%s is %s, want an array", path, short(got))
		}
		if len(g) != len(w) {
			return false, fmt.Sprintf("%s has %d items, want %d", path, len(g), len(w))
		}
		for i := range w {
			if ok, why := matchValue(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); !ok {
				return false, why
			}
		}
		return true, ""
	case json.Number:
		if g, ok := got.(json.Number); ok && numbersEqual(w, g) {
			return true, ""
		}
	default:
		// Strings, booleans and null compare exactly.
		if got == want {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%s is %s, want %s", path, short(got), short(want))
}

// numbersEqual compares two JSON numbers by value, so 3 equals 3.0 and 3e0.
// 512 bits keep every integer and decimal a model sends exact.
func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, _, errX := big.ParseFloat(string(a), 10, 512, big.ToNearestEven)
	y, _, errY := big.ParseFloat(string(b), 10, 512, big.ToNearestEven)
	if errX != nil || errY != nil {
		return false
	}
	return x.Cmp(y) == 0
}

// join extends a path with an object key, quoting keys that are not plain
// names.
func join(path, key string) string {
	if path == "arguments" {
		path = ""
	}
	if !plainKey(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// plainKey reports whether an object key can be shown without quotes: a
// letter or underscore, then letters, digits, underscores or hyphens.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && (c == '-' || '0' <= c && c <= '9'):
		default:
			return false
		}
	}
	return true
}

// short formats a value for a message, cut to a readable length.
func short(v any) string {
	s := formatValue(v)
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "…"
	}
	return s
}

// formatValue writes a value compactly for labels: {city:"Oslo",days:3}.
// Keys are sorted so the label is stable.
func formatValue(v any) string {
	var b strings.Builder
	writeValue(&b, v)
	return b.String()
}

func writeValue(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteByte(',')
			}
			if plainKey(k) {
				b.WriteString(k)
			} else {
				b.WriteString(strconv.Quote(k))
			}
			b.WriteByte(':')
			writeValue(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
	case string:
		b.WriteString(strconv.Quote(x))
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	default:
		fmt.Fprint(b, x)
	}
}
