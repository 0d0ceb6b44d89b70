package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mst-eval/mst/transcript"
)

// A run keeps every set of grades it was given. Set "1" holds the grades
// made as the run was collected (Run.AppendGrades and Run.Grades read and
// write it); each `mst grade` adds the next set beside the others, so a
// regrade never loses the grades it replaces in the report.

// GradeSet describes one set of a run's grades.
type GradeSet struct {
	// ID names the set: "1", "2", … in the order they were made.
	ID string `json:"id"`
	// Created is when the set was made; zero for set 1 of a run made
	// before grade sets were recorded.
	Created time.Time `json:"created,omitzero"`
	// By says what made it: "mst run" or "mst grade".
	By string `json:"by,omitempty"`
	// GradersFile is the file whose graders replaced the eval's (mst grade
	// --graders), "" when the eval's were used.
	GradersFile string `json:"gradersFile,omitempty"`
	// Graders are the eval-level graders of the set, as written; each
	// case's own expect list, stored with the cases, follows them.
	Graders []json.RawMessage `json:"graders"`
}

// Grades is the grade log of one set: a later grade of a key replaces an
// earlier one.
type Grades interface {
	AppendGrades(ctx context.Context, gs ...transcript.TrialGrade) error
	Grades(ctx context.Context, fn func(transcript.TrialGrade) error) error
}

// GradeHistory is what a grade log offers that can give every grade it
// holds, oldest first, without first finding each key's latest the way
// Grades does (which takes memory for every key). A later grade of a key
// replaces an earlier one, so a caller that keeps the last grade it is
// given of each key, in a table of its own (its plan's trials, say), ends
// with what Grades gives. Dir's grade logs implement it.
type GradeHistory interface {
	// GradeHistory calls fn for every readable grade of the log, in the
	// order they were appended; an error from fn stops it.
	GradeHistory(ctx context.Context, fn func(transcript.TrialGrade) error) error
}

// GradeSets is what a Run offers for its grade sets. Dir's runs implement
// it; a store that does not has only set 1 (its Run's own grades).
type GradeSets interface {
	// GradeSets lists the run's sets, oldest first. A run that has no
	// grade yet and made no set has none.
	GradeSets(ctx context.Context) ([]GradeSet, error)
	// NewGradeSet records a new set with the next id (set.ID is ignored)
	// and returns it as stored. Its grades start empty.
	NewGradeSet(ctx context.Context, set GradeSet) (GradeSet, error)
	// GradeSet returns the grade log of set id, or an error wrapping
	// ErrNotFound that lists the sets the run has.
	GradeSet(ctx context.Context, id string) (Grades, error)
}

// The files of grade sets, beside grades.jsonl (set 1).
const gradeSetsDir = "gradesets"

func gradeSetInfoFile(id string) string   { return gradeSetsDir + "/" + id + ".json" }
func gradeSetGradesFile(id string) string { return gradeSetsDir + "/" + id + ".jsonl" }

// GradeSets lists the run's grade sets: set 1 when the run has grades in
// grades.jsonl (or grades.json) or a record of set 1, then every set
// recorded under gradesets/, by number.
func (r *DirRun) GradeSets(ctx context.Context) ([]GradeSet, error) {
	ids, err := r.gradeSetIDs()
	if err != nil {
		return nil, err
	}
	var out []GradeSet
	for _, n := range ids {
		s, err := r.gradeSetInfo(strconv.Itoa(n))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// gradeSetIDs are the numbers of the run's sets, in order.
func (r *DirRun) gradeSetIDs() ([]int, error) {
	seen := map[int]bool{}
	for _, name := range []string{gradesFile, oldGradesFile} {
		if _, err := os.Stat(r.path(name)); err == nil {
			seen[1] = true
		}
	}
	ents, err := os.ReadDir(r.path(gradeSetsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(base); err == nil && n > 0 && strconv.Itoa(n) == base {
			seen[n] = true
		}
	}
	ids := make([]int, 0, len(seen))
	for n := range seen {
		ids = append(ids, n)
	}
	sort.Ints(ids)
	return ids, nil
}

// gradeSetInfo reads the record of set id. Set 1 of a run made before
// sets were recorded is described from the run's graders.
func (r *DirRun) gradeSetInfo(id string) (GradeSet, error) {
	var s GradeSet
	err := r.readJSON(gradeSetInfoFile(id), &s)
	switch {
	case err == nil:
		s.ID = id
		return s, nil
	case errors.Is(err, ErrNotFound) && id == "1":
		specs, err := r.ReadGraders(context.Background())
		if err != nil {
			return GradeSet{}, err
		}
		return GradeSet{ID: "1", By: "mst run", Graders: specs}, nil
	default:
		return GradeSet{}, fmt.Errorf("grade set %s: %w", id, err)
	}
}

// NewGradeSet records set as the next set of the run.
func (r *DirRun) NewGradeSet(ctx context.Context, set GradeSet) (GradeSet, error) {
	ids, err := r.gradeSetIDs()
	if err != nil {
		return GradeSet{}, err
	}
	next := 1
	if len(ids) > 0 {
		next = ids[len(ids)-1] + 1
	}
	set.ID = strconv.Itoa(next)
	if set.Graders == nil {
		set.Graders = []json.RawMessage{}
	}
	if err := os.MkdirAll(r.path(gradeSetsDir), 0o755); err != nil {
		return GradeSet{}, fmt.Errorf("recording grade set %s: %w", set.ID, err)
	}
	if err := r.writeJSON(gradeSetInfoFile(set.ID), set); err != nil {
		return GradeSet{}, fmt.Errorf("recording grade set %s: %w", set.ID, err)
	}
	return set, nil
}

// GradeSet returns the grade log of set id.
func (r *DirRun) GradeSet(ctx context.Context, id string) (Grades, error) {
	ids, err := r.gradeSetIDs()
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(id)
	for _, have := range ids {
		if have == n && strconv.Itoa(n) == id {
			if n == 1 {
				return r, nil
			}
			return &dirGradeSet{r: r, name: gradeSetGradesFile(id)}, nil
		}
	}
	var names []string
	for _, have := range ids {
		names = append(names, strconv.Itoa(have))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("run %s has no grade set %q, nor any other yet: grade it with mst grade (%w)", r.ID(), id, ErrNotFound)
	}
	return nil, fmt.Errorf("run %s has no grade set %q: its sets are %s (%w)", r.ID(), id, strings.Join(names, ", "), ErrNotFound)
}

// dirGradeSet is the grade log of a set after the first.
type dirGradeSet struct {
	r    *DirRun
	name string
}

func (g *dirGradeSet) AppendGrades(ctx context.Context, gs ...transcript.TrialGrade) error {
	return g.r.appendGrades(g.name, gs)
}

func (g *dirGradeSet) Grades(ctx context.Context, fn func(transcript.TrialGrade) error) error {
	return g.r.grades(ctx, g.name, "", fn)
}

func (g *dirGradeSet) GradeHistory(ctx context.Context, fn func(transcript.TrialGrade) error) error {
	return g.r.history(ctx, g.name, "", fn)
}

// GradeHistory gives the grades of set 1: those of grades.json (the form
// of older runs), then every line of grades.jsonl.
func (r *DirRun) GradeHistory(ctx context.Context, fn func(transcript.TrialGrade) error) error {
	return r.history(ctx, gradesFile, oldGradesFile, fn)
}

// history calls fn for the grades of the older whole-file form oldName
// (when not ""), then for every grade of the grades file name, in order:
// one pass, holding one grade at a time. A line that does not parse (a
// torn last line after a crash) is skipped, as Grades skips it.
func (r *DirRun) history(ctx context.Context, name, oldName string, fn func(transcript.TrialGrade) error) error {
	if oldName != "" {
		var old struct {
			Trials []transcript.TrialGrade `json:"trials"`
		}
		if err := r.readJSON(oldName, &old); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		for _, g := range old.Trials {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(g); err != nil {
				return err
			}
		}
	}
	f, err := os.Open(r.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	err = eachLine(f, func(line []byte, last bool) error {
		var g transcript.TrialGrade
		if json.Unmarshal(line, &g) != nil || g.Case == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(g)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

var (
	_ GradeSets    = (*DirRun)(nil)
	_ GradeHistory = (*DirRun)(nil)
	_ GradeHistory = (*dirGradeSet)(nil)
)
