package grader_test

import (
	"encoding/json"
	"testing"

	"github.com/mst-eval/mst/grade/gradertest"

	"example.com/mst-plugins/grader"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	opts := func(s string) json.RawMessage { return json.RawMessage(s) }
	gradertest.Run(t, grader.Definition(), []gradertest.Case{
		{Name: "within", Options: opts(`{"min": 2, "max": 5}`), Transcript: gradertest.Answered("rain"), Pass: true},
		{Name: "runes not bytes", Options: opts(`{"max": 4}`), Transcript: gradertest.Answered("東京は雨"), Pass: true},
		{Name: "too short", Options: opts(`{"min": 10}`), Transcript: gradertest.Answered("rain"), Pass: false},
		{Name: "too long", Options: opts(`{"max": 3}`), Transcript: gradertest.Answered("rain"), Pass: false},
		{Name: "exact", Options: opts(`{"min": 4, "max": 4}`), Transcript: gradertest.Answered("rain"), Pass: true},
	})
}

// TestRejects checks options the schema cannot rule out alone.
func TestRejects(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`{}`, `{"min": 5, "max": 2}`, `{"min": 1.5}`, `{"min": -1}`, `{"max": 2, "extra": 1}`} {
		if g, err := grader.Definition().New(json.RawMessage(bad)); err == nil {
			t.Errorf("New(%s) = %v, nil; want an error", bad, g)
		}
	}
}
