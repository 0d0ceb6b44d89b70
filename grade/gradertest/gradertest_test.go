package gradertest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/grade/gradertest"
	"github.com/mst-eval/mst/transcript"
)

// wordGrader passes when the answer holds its word.
type wordGrader struct{ word string }

func (g wordGrader) Name() string { return "has " + g.word }

func (g wordGrader) Grade(t *transcript.Transcript) grade.Result {
	if strings.Contains(t.Answer, g.word) {
		return grade.Result{Passed: true}
	}
	return grade.Result{Detail: fmt.Sprintf("the answer does not hold %q", g.word)}
}

// hasWord is a definition that keeps the contract; broken ones are made
// from it.
func hasWord() *grade.Definition {
	return &grade.Definition{
		Name:        "test/grader/has-word",
		Description: "Passes when the answer holds a word.",
		Options:     json.RawMessage(`{"type":"object","additionalProperties":false,"required":["word"],"properties":{"word":{"type":"string","minLength":1}}}`),
		New: func(options json.RawMessage) (grade.Grader, error) {
			var o struct {
				Word string `json:"word"`
			}
			dec := json.NewDecoder(strings.NewReader(string(options)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&o); err != nil {
				return nil, fmt.Errorf("has-word options: %w (give {\"word\": \"…\"})", err)
			}
			if o.Word == "" {
				return nil, fmt.Errorf("has-word: word is missing or empty")
			}
			return wordGrader{o.Word}, nil
		},
	}
}

var cases = []gradertest.Case{
	{Name: "holds", Options: json.RawMessage(`{"word":"rain"}`), Transcript: gradertest.Answered("Oslo: rain"), Pass: true},
	{Name: "lacks", Options: json.RawMessage(`{"word":"sun"}`), Transcript: gradertest.Answered("Oslo: rain"), Pass: false},
}

func TestConforming(t *testing.T) {
	t.Parallel()
	gradertest.Run(t, hasWord(), cases)
}

// mutating modifies the transcript it grades.
type mutating struct{ wordGrader }

func (g mutating) Grade(t *transcript.Transcript) grade.Result {
	t.Answer = strings.ToLower(t.Answer)
	return g.wordGrader.Grade(t)
}

// counting keeps state between calls.
type counting struct {
	wordGrader
	n *atomic.Int64
}

func (g counting) Grade(t *transcript.Transcript) grade.Result {
	r := g.wordGrader.Grade(t)
	if g.n.Add(1) > 1 {
		r.Detail += fmt.Sprintf(" (call %d)", g.n.Load())
	}
	return r
}

// silent fails without saying why.
type silent struct{ wordGrader }

func (g silent) Grade(t *transcript.Transcript) grade.Result {
	return grade.Result{Passed: strings.Contains(t.Answer, g.word)}
}

// panicky panics on a long answer.
type panicky struct{ wordGrader }

func (g panicky) Grade(t *transcript.Transcript) grade.Result {
	if len(t.Answer) > 1000 {
		panic("answer too long")
	}
	return g.wordGrader.Grade(t)
}

// wrap returns hasWord with its grader wrapped by f.
func wrap(f func(wordGrader) grade.Grader) *grade.Definition {
	d := hasWord()
	inner := d.New
	d.New = func(options json.RawMessage) (grade.Grader, error) {
		g, err := inner(options)
		if err != nil {
			return nil, err
		}
		return f(g.(wordGrader)), nil
	}
	return d
}

// TestBroken shows that the suite catches each way a definition can break
// the contract: Check must report a problem holding want.
func TestBroken(t *testing.T) {
	t.Parallel()
	lax := hasWord()
	lax.New = func(options json.RawMessage) (grade.Grader, error) {
		var o struct {
			Word string `json:"word"`
		}
		json.Unmarshal(options, &o)
		return wordGrader{o.Word}, nil
	}
	badSchema := hasWord()
	badSchema.Options = json.RawMessage(`{"type": 12}`)
	notObject := hasWord()
	notObject.Options = json.RawMessage(`["type"]`)
	noNew := hasWord()
	noNew.New = nil

	tests := []struct {
		name string
		def  *grade.Definition
		want string
	}{
		{"accepts garbage", lax, `New("x") = gradertest_test.wordGrader, nil; want an error`},
		{"accepts unknown option", lax, `New({"no-such-option-zz": 1})`},
		{"modifies the transcript", wrap(func(g wordGrader) grade.Grader { return mutating{g} }), "Grade modified the transcript"},
		{"keeps state", wrap(func(g wordGrader) grade.Grader { return counting{g, new(atomic.Int64)} }), "goroutines at once"},
		{"fails silently", wrap(func(g wordGrader) grade.Grader { return silent{g} }), "lacks: Grade failed without a Detail"},
		{"panics", wrap(func(g wordGrader) grade.Grader { return panicky{g} }), "(1 MiB answer): Grade panicked: answer too long"},
		{"bad schema", badSchema, "Options is not a valid JSON Schema"},
		{"schema not an object", notObject, "not a JSON object"},
		{"no New", noNew, "New is nil"},
		{"wrong verdict", hasWord(), "holds: Grade passed = true, want false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cs := cases
			if tt.name == "wrong verdict" {
				cs = []gradertest.Case{cases[0]}
				cs[0].Pass = false
			}
			err := gradertest.Check(tt.def, cs)
			if err == nil {
				t.Fatalf("Check(%s) = nil, want a problem holding %q", tt.name, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check(%s) =\n%v\nwant a problem holding %q", tt.name, err, tt.want)
			}
		})
	}
}

func TestOptionsOutsideSchema(t *testing.T) {
	t.Parallel()
	err := gradertest.Check(hasWord(), []gradertest.Case{{Name: "typo", Options: json.RawMessage(`{"wrod":"x"}`), Transcript: gradertest.Answered("x"), Pass: true}})
	if err == nil || !strings.Contains(err.Error(), "typo: options") {
		t.Errorf("Check with options the schema rejects = %v, want a problem naming the case", err)
	}
}
