package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// testGradeSets checks the grade sets of a store whose runs have them
// (store.GradeSets): set 1 is the run's own grades, a new set gets the
// next number and starts empty, every set keeps its own grades, and
// another handle of the run sees them all.
func testGradeSets(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	sets, ok := r.(store.GradeSets)
	if !ok {
		t.Fatalf("the store's runs keep only their own grades: implement store.GradeSets, which mst grade needs")
	}
	if got, err := sets.GradeSets(ctx); err != nil || len(got) != 0 {
		t.Errorf("GradeSets of a new run = %v, %v; want none", got, err)
	}
	if _, err := sets.GradeSet(ctx, "1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GradeSet(1) of a new run = %v, want ErrNotFound", err)
	}
	if err := r.WriteGraders(ctx, []json.RawMessage{json.RawMessage(`{"toolCalled":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	k := transcript.Key{Case: "c", Variant: "v", Trial: 1}
	first := sampleGrade(k, false, "first")
	if err := r.AppendGrades(ctx, first); err != nil {
		t.Fatal(err)
	}
	got, err := sets.GradeSets(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "1" || len(got[0].Graders) != 1 {
		t.Fatalf("GradeSets after grading = %+v, %v; want set 1 with the run's graders", got, err)
	}
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	made, err := sets.NewGradeSet(ctx, store.GradeSet{ID: "ignored", Created: created, By: "mst grade", Graders: []json.RawMessage{json.RawMessage(`{"maxToolCalls":1}`)}})
	if err != nil || made.ID != "2" {
		t.Fatalf("NewGradeSet = %+v, %v; want set 2", made, err)
	}
	two, err := sets.GradeSet(ctx, "2")
	if err != nil {
		t.Fatal(err)
	}
	if err := two.Grades(ctx, func(g transcript.TrialGrade) error { t.Errorf("a new set holds %v", g.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	second := sampleGrade(k, true, "")
	if err := two.AppendGrades(ctx, second); err != nil {
		t.Fatal(err)
	}
	o, err := s.Open(ctx, "run", nil)
	if err != nil {
		t.Fatal(err)
	}
	osets := o.(store.GradeSets)
	list, err := osets.GradeSets(ctx)
	if err != nil || len(list) != 2 || list[1].ID != "2" || list[1].By != "mst grade" || !list[1].Created.Equal(created) {
		t.Errorf("GradeSets through Open = %+v, %v", list, err)
	}
	for id, want := range map[string]transcript.TrialGrade{"1": first, "2": second} {
		g, err := osets.GradeSet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var have []transcript.TrialGrade
		g.Grades(ctx, func(tg transcript.TrialGrade) error { have = append(have, tg); return nil })
		if diff := cmp.Diff([]transcript.TrialGrade{want}, have, opts); diff != "" {
			t.Errorf("set %s (-want +got):\n%s", id, diff)
		}
	}
	if diff := cmp.Diff(map[transcript.Key]transcript.TrialGrade{k: first}, allGrades(t, o), opts); diff != "" {
		t.Errorf("the run's own grades are set 1's (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"3", "0", "02", "", "../1"} {
		if _, err := osets.GradeSet(ctx, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GradeSet(%q) = %v, want ErrNotFound", bad, err)
		}
	}
	if next, err := osets.NewGradeSet(ctx, store.GradeSet{By: "mst grade"}); err != nil || next.ID != "3" {
		t.Errorf("a third set = %+v, %v", next, err)
	}
}
