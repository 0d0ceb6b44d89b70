package gradertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/transcript"
)

// Case is one grading the suite checks: options the grader accepts, a
// transcript, and the verdict it must give.
type Case struct {
	// Name names the case in the suite's messages.
	Name string
	// Options is the value under the grader's key, as in a config.
	Options json.RawMessage
	// Transcript is graded; the suite never modifies it.
	Transcript *transcript.Transcript
	// Pass is the verdict Grade must give.
	Pass bool
}

// Goroutines is how many goroutines grade one case at once.
const Goroutines = 8

// Run checks def against the grader contract with cases, reporting each
// problem as an error of t. It calls t.Fatal when cases is empty.
func Run(t *testing.T, def *grade.Definition, cases []Case) {
	t.Helper()
	if len(cases) == 0 {
		t.Fatal("gradertest.Run needs at least one case (give one that passes and one that fails)")
	}
	for _, err := range Problems(Check(def, cases)) {
		t.Error(err)
	}
}

// Check is Run without a test: it returns every problem found, joined
// (errors.Join), or nil.
func Check(def *grade.Definition, cases []Case) error {
	if def == nil {
		return errors.New("the grade.Definition is nil")
	}
	name := def.Name
	if name == "" {
		name = "the grader"
	}
	if def.New == nil {
		return fmt.Errorf("%s: New is nil; a grade.Definition must have New", name)
	}
	c := &checker{def: def, name: name}
	c.schema = c.compile()
	c.garbage()
	for i, k := range cases {
		label := k.Name
		if label == "" {
			label = fmt.Sprintf("cases[%d]", i)
		}
		c.gradeCase(label, k)
	}
	return errors.Join(c.problems...)
}

// Problems splits an error that Check returned into its problems.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

type checker struct {
	def      *grade.Definition
	name     string
	schema   *jsonschema.Schema
	problems []error
}

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Errorf(c.name+": "+format, args...))
}

// compile compiles the Options schema, or returns nil when there is none
// or it is broken (a problem then).
func (c *checker) compile() *jsonschema.Schema {
	raw := bytes.TrimSpace(c.def.Options)
	if len(raw) == 0 {
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		c.fail("Options is not JSON: %v; it must be the JSON Schema of the grader's options", err)
		return nil
	}
	if _, ok := doc.(map[string]any); !ok {
		c.fail("Options is %.40s, not a JSON object; it must be a JSON Schema object such as {\"type\": \"object\", …}", raw)
		return nil
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("options.json", doc); err != nil {
		c.fail("Options schema: %v", err)
		return nil
	}
	s, err := comp.Compile("options.json")
	if err != nil {
		c.fail("Options is not a valid JSON Schema: %v", err)
		return nil
	}
	return s
}

// valid says whether the schema accepts raw (true without a schema).
func (c *checker) valid(raw json.RawMessage) (bool, error) {
	if c.schema == nil {
		return true, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return false, err
	}
	err = c.schema.Validate(v)
	return err == nil, err
}

// newGrader calls New, turning a panic into an error.
func (c *checker) newGrader(options json.RawMessage) (g grade.Grader, err error) {
	defer func() {
		if v := recover(); v != nil {
			//lint:ignore ST1005 New is the function's name
			err = fmt.Errorf("New panicked: %v", v)
			g = nil
		}
	}()
	return c.def.New(options)
}

// garbage checks that New rejects what the schema rejects.
func (c *checker) garbage() {
	bad := []string{`"x"`, `[1]`, `42`, `null`, `{"no-such-option-zz": 1}`}
	for _, b := range bad {
		raw := json.RawMessage(b)
		if c.schema == nil && b != `"x"` && b != `[1]` {
			continue
		}
		if ok, _ := c.valid(raw); ok {
			continue // the schema allows it: New may too
		}
		g, err := c.newGrader(raw)
		switch {
		case err == nil:
			c.fail("New(%s) = %T, nil; want an error: the options schema rejects %s, and New must reject what it rejects (a case's expect list reaches New unchecked)", b, g, b)
		case strings.TrimSpace(err.Error()) == "":
			c.fail("New(%s) returned an empty error; say which option is wrong and why", b)
		case strings.HasPrefix(err.Error(), "New panicked"):
			c.fail("New(%s): %v; return an error instead", b, err)
		}
	}
}

// gradeCase checks one case.
func (c *checker) gradeCase(label string, k Case) {
	if k.Transcript == nil {
		c.fail("%s: Case.Transcript is nil", label)
		return
	}
	if ok, err := c.valid(k.Options); !ok {
		c.fail("%s: options %s do not pass the grader's own Options schema: %v", label, k.Options, err)
		return
	}
	g, err := c.newGrader(k.Options)
	if err != nil || g == nil {
		c.fail("%s: New(%s) = %v, %v; want a Grader", label, k.Options, g, err)
		return
	}

	// One grading, on a copy compared with another after.
	work, want := clone(k.Transcript), clone(k.Transcript)
	r, ok := c.grade(label, g, work)
	if !ok {
		return
	}
	if d := cmp.Diff(want, work); d != "" {
		c.fail("%s: Grade modified the transcript (-before +after):\n%s", label, d)
	}
	switch {
	case r.Error != "":
		c.fail("%s: Grade gave Error %q, want a verdict (passed %v)", label, r.Error, k.Pass)
	case r.Passed != k.Pass:
		c.fail("%s: Grade passed = %v, want %v (detail %q)", label, r.Passed, k.Pass, r.Detail)
	case !r.Passed && strings.TrimSpace(r.Detail) == "":
		c.fail("%s: Grade failed without a Detail; say why the transcript fails", label)
	}

	// Many goroutines at once, each on its own copy.
	results := make([]grade.Result, Goroutines)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					results[i] = grade.Result{Error: fmt.Sprintf("panic: %v", v)}
				}
			}()
			results[i] = g.Grade(clone(k.Transcript))
		})
	}
	wg.Wait()
	for i, got := range results {
		if d := cmp.Diff(r, got); d != "" {
			c.fail("%s: Grade from %d goroutines at once: result %d differs from a lone Grade's (-lone +concurrent):\n%s", label, Goroutines, i, d)
			break
		}
	}

	for _, odd := range oddTranscripts(k.Transcript) {
		r, ok := c.grade(label+" ("+odd.name+")", g, odd.t)
		if !ok {
			continue
		}
		if r.Error == "" && !r.Passed && strings.TrimSpace(r.Detail) == "" {
			c.fail("%s (%s): Grade failed without a Detail", label, odd.name)
		}
	}
}

// gradeTimeout bounds one Grade of the suite: a grader runs for every
// trial of a run, so one that takes longer is broken.
const gradeTimeout = time.Minute

// grade calls g.Grade, turning a panic or a hang into a problem.
func (c *checker) grade(label string, g grade.Grader, t *transcript.Transcript) (grade.Result, bool) {
	type out struct {
		r     grade.Result
		panic any
	}
	done := make(chan out, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- out{panic: v}
			}
		}()
		done <- out{r: g.Grade(t)}
	}()
	timer := time.NewTimer(gradeTimeout)
	defer timer.Stop()
	select {
	case o := <-done:
		if o.panic != nil {
			c.fail("%s: Grade panicked: %v", label, o.panic)
			return grade.Result{}, false
		}
		return o.r, true
	case <-timer.C:
		c.fail("%s: Grade did not return within %v", label, gradeTimeout)
		return grade.Result{}, false
	}
}

type oddTranscript struct {
	name string
	t    *transcript.Transcript
}

// oddTranscripts are variations of t a grader must survive.
func oddTranscripts(t *transcript.Transcript) []oddTranscript {
	unicode := clone(t)
	unicode.Prompt += " — météo 東京 🌧️ \u202ertl\u202c \x00"
	unicode.Answer = "Réponse: 東京は雨 🌧️; Ελληνικά; emoji 👩‍👩‍👧 and a NUL \x00 and \uFFFD"
	long := clone(t)
	long.Answer = strings.Repeat("a long answer ", 1<<20/14)
	none := clone(t)
	none.ToolCalls, none.ClientToolCalls, none.Servers = nil, nil, nil
	errored := clone(t)
	errored.Answer = ""
	errored.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseClient, Detail: "the client failed"}
	return []oddTranscript{{"unicode", unicode}, {"1 MiB answer", long}, {"no tool calls", none}, {"errored", errored}}
}

// clone copies t deeply, through its JSON form.
func clone(t *transcript.Transcript) *transcript.Transcript {
	data, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("gradertest: encoding a transcript: %v", err))
	}
	var c transcript.Transcript
	if err := json.Unmarshal(data, &c); err != nil {
		panic(fmt.Sprintf("gradertest: decoding a transcript: %v", err))
	}
	return &c
}

// Answered returns a transcript of an answered trial with answer, one
// server and one tool call, for cases.
func Answered(answer string) *transcript.Transcript {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Run: "gradertest",
		Key:     transcript.Key{Case: "c1", Variant: "v", Trial: 1},
		Client:  transcript.ClientInfo{Name: "api"},
		Model:   "offline",
		Servers: []transcript.ServerInfo{{Name: "weather", Transport: "stdio", Tools: []string{"get_forecast"}}},
		Prompt:  "What is the forecast for Oslo?",
		Messages: []transcript.Message{
			{Role: "user", Text: "What is the forecast for Oslo?"},
			{Role: "assistant", ToolCalls: []string{"call-1"}},
			{Role: "tool", ToolCall: "call-1", Text: "Oslo: rain"},
			{Role: "assistant", Text: answer},
		},
		ToolCalls: []transcript.ToolCall{{
			ID: "call-1", Server: "weather", Tool: "get_forecast", Arguments: json.RawMessage(`{"city":"Oslo"}`),
			Result: "Oslo: rain", Started: start, DurationMs: 12, Evidence: transcript.EvidenceServer,
		}},
		Answer:  answer,
		Usage:   transcript.Usage{InputTokens: 100, OutputTokens: 20, ModelCalls: 2},
		Timing:  transcript.Timing{Started: start, Ended: start.Add(time.Second), DurationMs: 1000},
		Outcome: transcript.Outcome{Status: transcript.Answered},
	}
}
