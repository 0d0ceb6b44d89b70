package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

func testCreateOpen(t *testing.T, s store.Store) {
	ctx := t.Context()
	if s.Location() == "" {
		t.Errorf("Location() = %q, want where the store is", s.Location())
	}
	if _, err := s.Open(ctx, "missing", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
	r, err := s.Create(ctx, "run-1", nil)
	if err != nil {
		t.Fatalf("Create(run-1) = %v", err)
	}
	if r.ID() != "run-1" || r.Location() == "" {
		t.Errorf("Create(run-1): ID() = %q, Location() = %q, want run-1 and where it is", r.ID(), r.Location())
	}
	if _, err := s.Create(ctx, "run-1", nil); err == nil {
		t.Errorf("Create(run-1) twice = nil error, want the id taken")
	}
	rec := runRecord("run-1", 1)
	if err := r.WriteRun(ctx, rec); err != nil {
		t.Fatalf("WriteRun = %v", err)
	}
	if _, err := s.Create(ctx, "run-1", nil); err == nil {
		t.Errorf("Create(run-1) of a run with a record = nil error, want the id taken")
	}
	if _, err := r.WriteTranscript(ctx, sampleTranscript(transcript.Key{Case: "c1", Variant: "v", Trial: 1}, "hi")); err != nil {
		t.Fatalf("WriteTranscript = %v", err)
	}

	// Open returns the run Create made, with what was written to it.
	o, err := s.Open(ctx, "run-1", nil)
	if err != nil {
		t.Fatalf("Open(run-1) = %v", err)
	}
	if o.ID() != "run-1" {
		t.Errorf("Open(run-1).ID() = %q", o.ID())
	}
	got, err := o.ReadRun(ctx)
	if err != nil {
		t.Fatalf("ReadRun of opened run = %v", err)
	}
	if diff := cmp.Diff(rec, got, opts); diff != "" {
		t.Errorf("ReadRun of opened run (-want +got):\n%s", diff)
	}
	if ks := keys(t, o); len(ks) != 1 {
		t.Errorf("Keys of opened run = %v, want the one written before", ks)
	}

	// Runs are apart.
	other := create(t, s, "run-2", nil)
	if ks := keys(t, other); len(ks) != 0 {
		t.Errorf("Keys of a new run = %v, want none", ks)
	}
	if _, err := s.Open(ctx, "run-3", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open(run-3) = %v, want ErrNotFound", err)
	}
}

// badIDs are not run ids: a store refuses them rather than store a run
// somewhere else.
var badIDs = []string{"", ".", "..", "a/b", `a\b`, "../escape", "/abs", "a/../b", "run/"}

func testBadIDs(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range badIDs {
		if r, err := s.Create(ctx, id, nil); err == nil {
			t.Errorf("Create(%q) = run at %s, want an error: not a run id", id, r.Location())
		}
		if _, err := s.Open(ctx, id, nil); err == nil {
			t.Errorf("Open(%q) = nil error, want an error: not a run id", id)
		}
	}
	// Ids that are ids.
	for _, id := range []string{"2026-12-01T09-30-00Z-4f2a", "run_1.retry", "ünï"} {
		create(t, s, id, nil)
		if _, err := s.Open(ctx, id, nil); err != nil {
			t.Errorf("Open(%q) = %v", id, err)
		}
	}
}

func testRunRecord(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.Create(ctx, "run", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadRun(ctx); err == nil {
		t.Errorf("ReadRun before WriteRun = nil error, want one")
	}
	for n := 1; n <= 3; n++ {
		rec := runRecord("run", n)
		if n == 3 {
			rec.Note = strings.Repeat("ünïcødé ", 10000)
		}
		if err := r.WriteRun(ctx, rec); err != nil {
			t.Fatalf("WriteRun #%d = %v", n, err)
		}
		got, err := r.ReadRun(ctx)
		if err != nil {
			t.Fatalf("ReadRun #%d = %v", n, err)
		}
		if diff := cmp.Diff(rec, got, opts); diff != "" {
			t.Errorf("ReadRun after WriteRun #%d (-want +got):\n%s", n, diff)
		}
	}
}

// testRunRecordConcurrent has writers replace the record while readers
// read it: every record read is one that was written, whole.
func testRunRecordConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	// Each record's Note is long and follows from its Resumes, so a record
	// torn between two writes shows.
	record := func(n int) transcript.Run {
		rec := runRecord("run", n)
		rec.Note = strings.Repeat(fmt.Sprintf("%d;", n), 20000)
		return rec
	}
	if err := r.WriteRun(ctx, record(0)); err != nil {
		t.Fatal(err)
	}
	const writers, writes, readers = 4, 20, 4
	var wg, wwg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wwg.Go(func() {
			for i := range writes {
				if err := r.WriteRun(ctx, record(1+w*writes+i)); err != nil {
					t.Errorf("WriteRun = %v", err)
					return
				}
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := r.ReadRun(ctx)
				if err != nil {
					t.Errorf("ReadRun while writing = %v", err)
					return
				}
				if want := record(got.Resumes); got.Note != want.Note || got.ID != "run" {
					t.Errorf("ReadRun while writing = a torn record (resumes %d, note of %d bytes)", got.Resumes, len(got.Note))
					return
				}
			}
		})
	}
	wwg.Wait()
	close(done)
	wg.Wait()
	got, err := r.ReadRun(ctx)
	if err != nil || got.Note != record(got.Resumes).Note || got.Resumes < 1 {
		t.Errorf("ReadRun after the writers = resumes %d, %v; want a whole record of one of them", got.Resumes, err)
	}
}

func testConfig(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	for _, c := range []struct {
		name string
		data string
	}{
		{"eval.yaml", "name: weather\nvariants:\n  terse: {}\n"},
		{"weather.yml", "name: weather # again\n"},
		{"eval.json", `{"name": "weather"}`},
		{"EVAL.JSON", `{"name": "weather", "again": true}`},
		{"eval.yaml", ""},
	} {
		if err := r.WriteConfig(ctx, c.name, []byte(c.data)); err != nil {
			t.Errorf("WriteConfig(%q) = %v", c.name, err)
		}
	}
}

func testCases(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	cases := []transcript.Case{
		{ID: "plain", Input: "What is the weather in Oslo?", Source: "cases.yaml:1"},
		// Inputs are kept byte for byte: white space, line ends, characters
		// JSON and HTML escape, Unicode in any normalization.
		{ID: "spaces", Input: "  leading and trailing  \t\n", Source: "cases.yaml:3"},
		{ID: "crlf", Input: "line one\r\nline two\r\n\r\n"},
		{ID: "escapes", Input: `quote " backslash \ <b>&amp;</b> ` + "\u2028\u2029 nul \x00 bell \a"},
		{ID: "unicode", Input: "Café, cafe\u0301, 東京の天気, emoji 🌦️, رطب, 𝔘𝔫𝔦"},
		{ID: "long", Input: strings.Repeat("a long prompt, ", 70000)},
		{
			ID: "full", Input: "Weather?", Model: "claude-sonnet-4-5",
			Expect:        []json.RawMessage{json.RawMessage(`{"toolCalled": "get_forecast"}`), json.RawMessage(`{"answerContains":"<sunny>"}`)},
			ClientOptions: json.RawMessage(`{"maxActions": 8, "temperature": 0.5}`),
			Metadata: map[string]any{
				"difficulty": "hard", "weight": json.Number("2.5"), "count": json.Number("12345678901234567890"),
				"tags": []any{"a", json.Number("1"), true, nil}, "nested": map[string]any{"k": "v", "n": json.Number("0")},
				"flag": false, "none": nil,
			},
			Source: "cases.jsonl:7",
		},
	}
	if err := r.WriteCases(ctx, cases); err != nil {
		t.Fatalf("WriteCases = %v", err)
	}
	got, err := r.ReadCases(ctx)
	if err != nil {
		t.Fatalf("ReadCases = %v", err)
	}
	if diff := cmp.Diff(cases, got, opts); diff != "" {
		t.Errorf("ReadCases (-want +got):\n%s", diff)
	}
	for i := range min(len(cases), len(got)) {
		if got[i].Input != cases[i].Input {
			t.Errorf("ReadCases()[%d].Input = %q, want %q byte for byte", i, got[i].Input, cases[i].Input)
		}
	}

	// A second WriteCases replaces the first.
	if err := r.WriteCases(ctx, cases[:1]); err != nil {
		t.Fatalf("WriteCases again = %v", err)
	}
	if got, err := r.ReadCases(ctx); err != nil || len(got) != 1 || got[0].ID != "plain" {
		t.Errorf("ReadCases after a second WriteCases = %d cases, %v; want the one written last", len(got), err)
	}
	if err := r.WriteCases(ctx, nil); err != nil {
		t.Fatalf("WriteCases(nil) = %v", err)
	}
	if got, err := r.ReadCases(ctx); err != nil || len(got) != 0 {
		t.Errorf("ReadCases after WriteCases(nil) = %d cases, %v; want none", len(got), err)
	}
}

func testGraders(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	if got, err := r.ReadGraders(ctx); err != nil || len(got) != 0 {
		t.Errorf("ReadGraders of a run that stored none = %s, %v; want none", got, err)
	}
	specs := []json.RawMessage{
		json.RawMessage(`{"toolCalled": "get_forecast", "args": {"city": "Oslo"}}`),
		json.RawMessage(`{"answerMatches":"^(sunny|clear) <&>$","flags":"i"}`),
		json.RawMessage(`{"all": [{"noToolCalled": "delete"}, {"maxToolCalls": 3}], "note": "東京"}`),
	}
	if err := r.WriteGraders(ctx, specs); err != nil {
		t.Fatalf("WriteGraders = %v", err)
	}
	got, err := r.ReadGraders(ctx)
	if err != nil {
		t.Fatalf("ReadGraders = %v", err)
	}
	if diff := cmp.Diff(specs, got, opts); diff != "" {
		t.Errorf("ReadGraders (-want +got):\n%s", diff)
	}
	if err := r.WriteGraders(ctx, nil); err != nil {
		t.Fatalf("WriteGraders(nil) = %v", err)
	}
	if got, err := r.ReadGraders(ctx); err != nil || len(got) != 0 {
		t.Errorf("ReadGraders after WriteGraders(nil) = %s, %v; want none", got, err)
	}
}
