package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
)

// readJSONL reads one case per line; blank lines are skipped.
func (r *reader) readJSONL(data []byte) {
	for i, text := range bytes.Split(data, []byte("\n")) {
		line := i + 1
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		// Each line on its own: a string left open on one line must not
		// hide the brackets of the next.
		if p := inputcheck.JSONDepth(text); p != nil {
			r.fail(line, "", fmt.Sprintf("column %d: %s", p.Col, p.Msg))
			continue
		}
		if p := inputcheck.JSONText(text); p != nil {
			r.fail(line, "", fmt.Sprintf("column %d: %s", p.Col, p.Msg))
			continue
		}
		dec := newDecoder(text)
		v, err := dec.value()
		if err == nil {
			if _, extra := dec.dec.Token(); extra != io.EOF {
				err = errors.New("more than one JSON value on the line (one case per line)")
			}
		}
		if err != nil {
			msg, off := dec.explain(err)
			if off >= 0 {
				_, col := inputcheck.At(text, int(off))
				msg += fmt.Sprintf(" (column %d)", col)
			}
			r.fail(line, "", "invalid JSON: "+msg)
			continue
		}
		r.addObject(v, line)
	}
}

// readJSON reads an array of cases.
func (r *reader) readJSON(data []byte) {
	if len(bytes.TrimSpace(data)) == 0 || !r.jsonBounds(data) {
		return
	}
	dec := newDecoder(data)
	at := dec.start()
	tok, err := dec.dec.Token()
	if err != nil {
		r.syntax(dec, err)
		return
	}
	if tok != json.Delim('[') {
		hint := ""
		if tok == json.Delim('{') {
			hint = " (for one object per line, name the file .jsonl)"
		}
		r.fail(dec.line(at), "", "a .json dataset must be a list of cases, [{\"id\": …, \"input\": …}, …]"+hint)
		return
	}
	for dec.dec.More() {
		at := dec.start()
		v, err := dec.value()
		if err != nil {
			r.syntax(dec, err)
			return
		}
		r.addObject(v, dec.line(at))
	}
	if _, err := dec.dec.Token(); err != nil {
		r.syntax(dec, err)
		return
	}
	if at := dec.start(); at < int64(len(data)) {
		r.fail(dec.line(at), "", "invalid JSON: unexpected text after the list of cases")
	}
}

// jsonBounds checks the JSON text's nesting and escapes before it is
// decoded, and reports whether it may be.
func (r *reader) jsonBounds(data []byte) bool {
	if p := inputcheck.JSONDepth(data); p != nil {
		r.problem(p)
		return false
	}
	if p := inputcheck.JSONText(data); p != nil {
		r.problem(p)
		return false
	}
	return true
}

// syntax reports a JSON file that cannot be read on.
func (r *reader) syntax(dec *decoder, err error) {
	msg, off := dec.explain(err)
	if off < 0 {
		off = dec.start()
	}
	r.fail(dec.line(off), "", "invalid JSON: "+msg)
}

// decoder reads JSON values with exact numbers and rejects duplicate keys.
type decoder struct {
	data []byte
	dec  *json.Decoder
}

func newDecoder(data []byte) *decoder {
	d := &decoder{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	d.dec.UseNumber()
	return d
}

// start is the offset where the next token begins.
func (d *decoder) start() int64 {
	off := d.dec.InputOffset()
	for off < int64(len(d.data)) {
		switch d.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

// line is the 1-based line of a byte offset.
func (d *decoder) line(off int64) int {
	off = min(max(off, 0), int64(len(d.data)))
	return bytes.Count(d.data[:off], []byte("\n")) + 1
}

func (d *decoder) value() (any, error) {
	tok, err := d.dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for d.dec.More() {
			kt, err := d.dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			if _, dup := m[key]; dup {
				return nil, fmt.Errorf("key %q is given twice", key)
			}
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
		_, err := d.dec.Token()
		return m, err
	case json.Delim('['):
		list := []any{}
		for d.dec.More() {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := d.dec.Token()
		return list, err
	}
	return tok, nil
}

// explain words a decoding error, and returns the byte offset it concerns
// when known (else -1).
func (d *decoder) explain(err error) (string, int64) {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// A syntax error met through Token has an imprecise offset;
		// decoding the whole text again gives the exact one.
		var v any
		if uerr := json.Unmarshal(d.data, &v); errors.As(uerr, &se) {
			return inputcheck.JSONSyntax(d.data, se.Offset, se.Error()), max(se.Offset-1, 0)
		}
		return inputcheck.JSONSyntax(d.data, se.Offset, se.Error()), -1
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end (a bracket or quote is not closed)", max(int64(len(d.data))-1, 0)
	}
	return err.Error(), -1
}
