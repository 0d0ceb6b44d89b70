package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Grade sets as the directory store keeps them (store.GradeSets): set 1 is
// the run's own grades (grades/), set N ≥ 2 is described by
// gradesets/N.json and its grades are objects under gradesets/N/.

func gradeSetInfoName(id string) string { return store.GradeSetsName + "/" + id + ".json" }
func gradeSetDir(id string) string      { return store.GradeSetsName + "/" + id }

// has says whether any object is under the run's prefix name/.
func (r *Run) has(ctx context.Context, name string) (bool, error) {
	ok, err := r.s.any(ctx, r.key(name+"/"))
	if err != nil {
		return false, r.fail("listing "+name, err)
	}
	return ok, nil
}

// gradeSetIDs are the numbers of the run's sets, in order.
func (r *Run) gradeSetIDs(ctx context.Context) ([]int, error) {
	seen := map[int]bool{}
	if ok, err := r.has(ctx, gradesDir); err != nil {
		return nil, err
	} else if ok {
		seen[1] = true
	}
	err := r.s.list(ctx, &blob.ListOptions{Prefix: r.key(store.GradeSetsName + "/"), Delimiter: "/"}, nil, func(o *blob.ListObject) error {
		base, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, r.key(store.GradeSetsName+"/")), ".json")
		if n, err := strconv.Atoi(base); ok && !o.IsDir && err == nil && n > 0 && strconv.Itoa(n) == base {
			seen[n] = true
		}
		return nil
	})
	if err != nil {
		return nil, r.fail("listing grade sets", err)
	}
	ids := make([]int, 0, len(seen))
	for n := range seen {
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids, nil
}

// GradeSets lists the run's grade sets, oldest first.
func (r *Run) GradeSets(ctx context.Context) ([]store.GradeSet, error) {
	ids, err := r.gradeSetIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.GradeSet
	for _, n := range ids {
		s, err := r.gradeSetInfo(ctx, strconv.Itoa(n))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (r *Run) gradeSetInfo(ctx context.Context, id string) (store.GradeSet, error) {
	b, err := r.read(ctx, gradeSetInfoName(id))
	switch {
	case err == nil:
		var s store.GradeSet
		if err := json.Unmarshal(b, &s); err != nil {
			return store.GradeSet{}, fmt.Errorf("%s: %w", r.where(gradeSetInfoName(id)), err)
		}
		s.ID = id
		return s, nil
	case errors.Is(err, store.ErrNotFound) && id == "1":
		specs, err := r.ReadGraders(ctx)
		if err != nil {
			return store.GradeSet{}, err
		}
		return store.GradeSet{ID: "1", By: "mst run", Graders: specs}, nil
	default:
		return store.GradeSet{}, fmt.Errorf("grade set %s: %w", id, err)
	}
}

// NewGradeSet records set as the next set of the run. Its record is
// written on the condition that its name is free, so two makers of sets
// at once get two numbers.
func (r *Run) NewGradeSet(ctx context.Context, set store.GradeSet) (store.GradeSet, error) {
	if set.Graders == nil {
		set.Graders = []json.RawMessage{}
	}
	for {
		ids, err := r.gradeSetIDs(ctx)
		if err != nil {
			return store.GradeSet{}, err
		}
		next := 1
		if len(ids) > 0 {
			next = ids[len(ids)-1] + 1
		}
		set.ID = strconv.Itoa(next)
		b, err := json.MarshalIndent(set, "", "  ")
		if err != nil {
			return store.GradeSet{}, err
		}
		err = r.write(ctx, gradeSetInfoName(set.ID), append(b, '\n'), true)
		if lost(err) {
			continue // another took that number
		}
		if err != nil {
			return store.GradeSet{}, describe(r.where(gradeSetInfoName(set.ID)), "recording grade set "+set.ID, err)
		}
		return set, nil
	}
}

// GradeSet returns the grade log of set id.
func (r *Run) GradeSet(ctx context.Context, id string) (store.Grades, error) {
	ids, err := r.gradeSetIDs(ctx)
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(id)
	var names []string
	for _, have := range ids {
		if have == n && strconv.Itoa(n) == id {
			if n == 1 {
				return r, nil
			}
			return &gradeSet{r: r, dir: gradeSetDir(id)}, nil
		}
		names = append(names, strconv.Itoa(have))
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("grade set %q: %w: run %s has no grades yet (grade it with mst grade)", id, store.ErrNotFound, r.ID())
	}
	return nil, fmt.Errorf("grade set %q: %w: run %s has grade sets %s", id, store.ErrNotFound, r.ID(), strings.Join(names, ", "))
}

// gradeSet is the grade log of a set after the first.
type gradeSet struct {
	r   *Run
	dir string
}

func (g *gradeSet) AppendGrades(ctx context.Context, gs ...transcript.TrialGrade) error {
	return g.r.appendGrades(ctx, g.dir, gs)
}

func (g *gradeSet) Grades(ctx context.Context, fn func(transcript.TrialGrade) error) error {
	return g.r.grades(ctx, g.dir, fn)
}

var _ store.GradeSets = (*Run)(nil)
