package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

func testGrades(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	if got := allGrades(t, r); len(got) != 0 {
		t.Errorf("Grades of a new run = %v, want none", got)
	}
	if err := r.AppendGrades(ctx); err != nil {
		t.Errorf("AppendGrades() = %v, want nil", err)
	}
	k1 := transcript.Key{Case: "c1", Variant: "v", Trial: 1}
	k2 := transcript.Key{Case: "c2", Variant: "v", Trial: 1}
	k3 := transcript.Key{Case: "c1", Variant: "w", Trial: 2}
	errored := transcript.TrialGrade{Key: k3, Trial: transcript.Summary{Status: transcript.Errored, Cause: transcript.CauseRunner}}
	g1, g2 := sampleGrade(k1, false, "no sun"), sampleGrade(k2, true, "")
	if err := r.AppendGrades(ctx, g1, g2, errored); err != nil {
		t.Fatalf("AppendGrades = %v", err)
	}
	want := map[transcript.Key]transcript.TrialGrade{k1: g1, k2: g2, k3: errored}
	if diff := cmp.Diff(want, allGrades(t, r), opts); diff != "" {
		t.Errorf("Grades (-want +got):\n%s", diff)
	}

	// A later grade of a key replaces the earlier: in a later call, and in
	// one call.
	g1b := sampleGrade(k1, true, "")
	if err := r.AppendGrades(ctx, g1b); err != nil {
		t.Fatal(err)
	}
	g3a, g3b := sampleGrade(k3, false, "first regrade"), sampleGrade(k3, true, "")
	if err := r.AppendGrades(ctx, g3a, g3b); err != nil {
		t.Fatal(err)
	}
	want = map[transcript.Key]transcript.TrialGrade{k1: g1b, k2: g2, k3: g3b}
	if diff := cmp.Diff(want, allGrades(t, r), opts); diff != "" {
		t.Errorf("Grades after regrading (-want +got):\n%s", diff)
	}
	// Another handle of the run sees them.
	o, err := s.Open(ctx, "run", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, allGrades(t, o), opts); diff != "" {
		t.Errorf("Grades through Open (-want +got):\n%s", diff)
	}
}

func testGradesStop(t *testing.T, s store.Store) {
	r := create(t, s, "run", nil)
	var gs []transcript.TrialGrade
	for i := range 3 {
		gs = append(gs, sampleGrade(transcript.Key{Case: fmt.Sprint("c", i), Variant: "v", Trial: 1}, true, ""))
	}
	if err := r.AppendGrades(t.Context(), gs...); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	err := r.Grades(t.Context(), func(transcript.TrialGrade) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Grades with fn failing = %v after %d calls, want fn's error after 1", err, n)
	}
}

// testGradesConcurrent has many appenders, on two handles of the run, add
// grades at once: none is lost.
func testGradesConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	o, err := s.Open(ctx, "run", nil)
	if err != nil {
		t.Fatal(err)
	}
	const appenders, appends = 16, 25
	want := map[transcript.Key]transcript.TrialGrade{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for a := range appenders {
		h := r
		if a%2 == 1 {
			h = o
		}
		wg.Go(func() {
			for i := range appends {
				// Every other append carries a batch of three.
				var gs []transcript.TrialGrade
				for j := range 1 + i%2*2 {
					k := transcript.Key{Case: fmt.Sprintf("c%d-%d", i, j), Variant: fmt.Sprint("v", a), Trial: 1}
					gs = append(gs, sampleGrade(k, j%2 == 0, strings.Repeat("x", 100*a)))
				}
				if err := h.AppendGrades(ctx, gs...); err != nil {
					t.Errorf("AppendGrades = %v", err)
					return
				}
				mu.Lock()
				for _, g := range gs {
					want[g.Key] = g
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := allGrades(t, r)
	if len(got) != len(want) {
		t.Errorf("Grades after %d concurrent appenders = %d grades, want %d", appenders, len(got), len(want))
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("Grades after concurrent appends (-want +got):\n%s", diff)
	}
}

// testGradesLarge stores many grades and a huge one: Grades gives each key
// once.
func testGradesLarge(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	const n, batch = 20000, 1000
	for b := 0; b < n; b += batch {
		gs := make([]transcript.TrialGrade, 0, batch)
		for i := b; i < b+batch; i++ {
			k := transcript.Key{Case: fmt.Sprint("case-", i), Variant: "v", Trial: 1 + i%3}
			gs = append(gs, transcript.TrialGrade{Key: k, Graded: true, Passed: i%2 == 0, Results: []transcript.Result{{Grader: "g", Passed: i%2 == 0}}})
		}
		if err := r.AppendGrades(ctx, gs...); err != nil {
			t.Fatalf("AppendGrades of grades %d… = %v", b, err)
		}
	}
	bigKey := transcript.Key{Case: "big", Variant: "v", Trial: 1}
	big := sampleGrade(bigKey, false, strings.Repeat("a very long detail ", 1<<20/19+1))
	if err := r.AppendGrades(ctx, big); err != nil {
		t.Fatalf("AppendGrades of a 1 MB grade = %v", err)
	}
	// Regrade a few: still one call per key.
	if err := r.AppendGrades(ctx, sampleGrade(transcript.Key{Case: "case-7", Variant: "v", Trial: 2}, true, "regraded")); err != nil {
		t.Fatal(err)
	}
	got := allGrades(t, r)
	if len(got) != n+1 {
		t.Errorf("Grades of %d grades = %d", n+1, len(got))
	}
	if diff := cmp.Diff(big, got[bigKey], opts); diff != "" {
		t.Errorf("Grades: the 1 MB grade (-want +got):\n%.2000s", diff)
	}
	if g := got[transcript.Key{Case: "case-7", Variant: "v", Trial: 2}]; g.Results[1].Detail != "regraded" {
		t.Errorf("Grades: case-7 = detail %q, want the regrade", g.Results[1].Detail)
	}
}

// testCancelled reads with a cancelled context: the streaming reads fail
// with its error and call fn for nothing.
func testCancelled(t *testing.T, s store.Store) {
	r := create(t, s, "run", nil)
	k := transcript.Key{Case: "c1", Variant: "v", Trial: 1}
	if _, err := r.WriteTranscript(t.Context(), sampleTranscript(k, "a")); err != nil {
		t.Fatal(err)
	}
	if err := r.AppendGrades(t.Context(), sampleGrade(k, true, "")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n := 0
	if err := r.Transcripts(ctx, func(*transcript.Transcript) error { n++; return nil }); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("Transcripts(cancelled) = %v after %d calls, want context.Canceled after none", err, n)
	}
	if err := r.Grades(ctx, func(transcript.TrialGrade) error { n++; return nil }); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("Grades(cancelled) = %v after %d calls, want context.Canceled after none", err, n)
	}
}
