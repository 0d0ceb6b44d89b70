package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
)

// Decode reads a transcript from its JSON, old names included. An error
// says in MST's words where the text is wrong; it wraps the error of
// encoding/json (a *json.SyntaxError for text that is not JSON).
func Decode(b []byte) (*Transcript, error) {
	var t Transcript
	if err := decodeJSON(b, &t, "a transcript"); err != nil {
		return nil, err
	}
	t.Normalize()
	return &t, nil
}

// DecodeRun reads a run record (run.json). Its errors are as Decode's.
func DecodeRun(b []byte) (Run, error) {
	var r Run
	err := decodeJSON(b, &r, "a run record")
	return r, err
}

// DecodeError is a stored record that cannot be read.
type DecodeError struct {
	// Line and Col are where the text is wrong, 1-based; zero when the
	// problem is not at one place.
	Line, Col int
	Msg       string
	// Err is the error of encoding/json.
	Err error
}

func (e *DecodeError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
	}
	return e.Msg
}

func (e *DecodeError) Unwrap() error { return e.Err }

func decodeJSON(b []byte, v any, what string) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return &DecodeError{Msg: "the file is empty, not " + what, Err: io.ErrUnexpectedEOF}
	}
	err := json.Unmarshal(b, v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := inputcheck.At(b, int(se.Offset)-1)
		return &DecodeError{Line: line, Col: col, Msg: fmt.Sprintf("not %s: %s", what, inputcheck.JSONSyntax(b, se.Offset, se.Error())), Err: err}
	case errors.As(err, &te):
		line, col := inputcheck.At(b, int(te.Offset)-1)
		field := te.Field
		if field == "" {
			field = "the top level"
		}
		return &DecodeError{Line: line, Col: col, Msg: fmt.Sprintf("not %s: %s must be %s, got a JSON %s", what, field, goType(te.Type), te.Value), Err: err}
	}
	return &DecodeError{Msg: fmt.Sprintf("not %s: %v", what, err), Err: err}
}

// goType words a Go type for a message.
func goType(t reflect.Type) string {
	if t == nil {
		return "a value of another kind"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			return "a time such as 2026-12-01T10:00:00Z"
		}
		return "an object"
	case reflect.Pointer:
		return goType(t.Elem())
	}
	return "a value of another kind"
}
