// Package grader is an example Go plugin that adds one grader kind,
// acme/grader/answer-length: a trial passes when its answer is between
// min and max characters long.
//
// It shows the smallest complete grader plugin: a grade.Definition with a
// strict options schema, a New that is as strict as the schema (a case's
// expect list reaches New without the schema check), and a Grader that
// keeps no mutable state, so MST may call Grade from many goroutines.
package grader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/plugin"
	"github.com/mst-eval/mst/transcript"
)

// Plugin is the acme plugin with its one grader.
func Plugin() plugin.Plugin {
	return plugin.Plugin{
		Namespace:   "acme",
		Version:     "1.0.0",
		Description: "Example grader: the answer's length in characters.",
		Module:      "example.com/mst-plugins/grader",
		Graders:     []*grade.Definition{Definition()},
	}
}

// Definition is the answer-length grader kind, by its short name.
func Definition() *grade.Definition {
	return &grade.Definition{
		Name:        "answer-length",
		Description: "Passes when the answer has between min and max characters (Unicode code points).",
		Options: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "minProperties": 1,
  "properties": {
    "min": {"type": "integer", "minimum": 0, "description": "Fewest characters the answer may have (default 0)."},
    "max": {"type": "integer", "minimum": 0, "description": "Most characters the answer may have (default: no limit)."}
  }
}`),
		New: newGrader,
	}
}

// options are the grader's options; nil means not given.
type options struct {
	Min *int `json:"min"`
	Max *int `json:"max"`
}

func newGrader(raw json.RawMessage) (grade.Grader, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var o *options
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("answer-length: %w; give an object such as {\"min\": 10, \"max\": 200}", err)
	}
	if o == nil || o.Min == nil && o.Max == nil {
		return nil, errors.New("answer-length: give min, max or both, such as {\"max\": 200}")
	}
	g := lengthGrader{min: 0, max: -1}
	if o.Min != nil {
		g.min = *o.Min
	}
	if o.Max != nil {
		g.max = *o.Max
	}
	if g.min < 0 || o.Max != nil && g.max < 0 {
		return nil, fmt.Errorf("answer-length: min and max must not be negative (min %d, max %d)", g.min, g.max)
	}
	if o.Max != nil && g.max < g.min {
		return nil, fmt.Errorf("answer-length: max (%d) is less than min (%d)", g.max, g.min)
	}
	return g, nil
}

// lengthGrader holds its bounds only; max is -1 for no limit.
type lengthGrader struct{ min, max int }

func (g lengthGrader) Name() string {
	if g.max < 0 {
		return fmt.Sprintf("at least %d characters", g.min)
	}
	return fmt.Sprintf("%d to %d characters", g.min, g.max)
}

func (g lengthGrader) Grade(t *transcript.Transcript) grade.Result {
	n := utf8.RuneCountInString(t.Answer)
	switch {
	case n < g.min:
		return grade.Result{Detail: fmt.Sprintf("the answer has %d characters, fewer than min %d", n, g.min)}
	case g.max >= 0 && n > g.max:
		return grade.Result{Detail: fmt.Sprintf("the answer has %d characters, more than max %d", n, g.max)}
	}
	return grade.Result{Passed: true}
}
