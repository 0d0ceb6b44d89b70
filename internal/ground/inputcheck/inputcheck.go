// Package inputcheck holds the bounds MST puts on the files people give it
// (eval configs and datasets) and the checks that apply them before a
// parser sees the bytes: a file's size, its text being UTF-8 and not
// binary, the nesting depth of JSON and YAML, and how much YAML aliases
// may expand. It also words the errors of encoding/json and of the YAML
// parser in MST's own terms.
//
// A file is often shared, so it is read as untrusted: every bound is there
// so that a small file cannot make MST use memory or time out of
// proportion to its size, and a file over a bound is refused with where
// it is and what the bound is.
package inputcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// The bounds. They are far above what a real config or dataset needs.
const (
	// MaxConfigBytes is the largest eval config MST reads.
	MaxConfigBytes = 4 << 20
	// MaxDatasetBytes is the largest dataset file MST reads.
	MaxDatasetBytes = 64 << 20
	// MaxDepth is the deepest nesting of objects and lists in a JSON or
	// YAML file (the top level is depth 1).
	MaxDepth = 128
	// MaxAliasNodes is how many values YAML aliases may add to a file
	// when they are expanded, counting each value an alias repeats (a
	// list of 9 items behind an alias adds 10).
	MaxAliasNodes = 5000
)

// ErrTooLarge is the error of a file over its size bound.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the file at path, refusing one of more than max bytes
// without reading it all. The error wraps ErrTooLarge, or is the error of
// os.Open or of reading.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: the file is larger than %s, the most MST reads", ErrTooLarge, Size(max))
	}
	return data, nil
}

// Size words a byte count such as 64 MiB.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Problem is a finding at a place in a file.
type Problem struct {
	// Line and Col are 1-based; Col counts characters.
	Line, Col int
	Msg       string
}

func (p *Problem) Error() string { return fmt.Sprintf("%d:%d: %s", p.Line, p.Col, p.Msg) }

// At returns the line and column of byte offset off in data.
func At(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// Text checks that data is text MST can read: no NUL byte (which only a
// binary file holds) and valid UTF-8. what names the file's kind for the
// message ("dataset", "config"). It returns nil when data is fine.
func Text(data []byte, what string) *Problem {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		line, col := At(data, i)
		return &Problem{line, col, fmt.Sprintf("this is not a text file (it holds a NUL byte): a %s is UTF-8 text", what)}
	}
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			line, col := At(data, i)
			return &Problem{line, col, fmt.Sprintf("invalid UTF-8 (byte 0x%02x): a %s is UTF-8 text; save the file as UTF-8", data[i], what)}
		}
		i += n
	}
	return nil
}

// JSONText checks, in a file that is valid UTF-8 and holds JSON, that no
// string escapes a lone UTF-16 surrogate (\ud800 with no low half): the
// JSON decoder would turn it silently into U+FFFD.
func JSONText(data []byte) *Problem {
	return surrogates(data, false)
}

// surrogates finds an escape of a lone UTF-16 surrogate in data: in its
// double-quoted strings or, when quoted is true, up to the first quote
// (data starts inside a double-quoted string).
func surrogates(data []byte, quoted bool) *Problem {
	inString := quoted
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '"' && quoted:
			return nil
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(data):
			if data[i+1] != 'u' {
				i++
				continue
			}
			hi, ok := hex4(data, i+2)
			if !ok {
				i++
				continue
			}
			switch {
			case hi >= 0xD800 && hi < 0xDC00:
				if lo, ok := hex4(data, i+8); ok && i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' && lo >= 0xDC00 && lo < 0xE000 {
					i += 11
					continue
				}
			case hi >= 0xDC00 && hi < 0xE000:
			default:
				i += 5
				continue
			}
			line, col := At(data, i)
			return &Problem{line, col, fmt.Sprintf(`the escape \u%04x is half of a UTF-16 pair and stands for no character: the text would not be valid UTF-8`, hi)}
		}
	}
	return nil
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// JSONDepth checks that no value in the JSON text data nests deeper than
// MaxDepth. It reads brackets outside strings only, so it runs in one pass
// before any parser builds values.
func JSONDepth(data []byte) *Problem {
	depth := 0
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > MaxDepth {
				line, col := At(data, i)
				return &Problem{line, col, DepthMessage()}
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}

// DepthMessage is the message of a value nested deeper than MaxDepth.
func DepthMessage() string {
	return fmt.Sprintf("objects and lists are nested more than %d deep, the most MST reads", MaxDepth)
}
