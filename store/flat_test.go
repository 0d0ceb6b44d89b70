package store

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mst-eval/mst/transcript"
)

// TestWalkBothLayouts stores trials at both their places, the current
// layout's and an older version's, for ids whose names differ between the
// two: Keys, EachKey and Transcripts give each key once, and Transcripts
// the file a walk of the folder meets first, as when the walk kept a set of
// the keys it met.
func TestWalkBothLayouts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := OpenDir(t.TempDir(), nil)
	var keys []transcript.Key
	for _, v := range []string{"terse", "V 1"} {
		for i, c := range append([]string{"plain-1"}, legacyIDs...) {
			k := transcript.Key{Case: c, Variant: v, Trial: 1 + i%3}
			keys = append(keys, k)
			if _, err := r.WriteTranscript(ctx, &transcript.Transcript{Kind: "mst.transcript", Key: k, Answer: "current"}); err != nil {
				t.Fatal(err)
			}
			if legacyPath(k) == transcriptPath(k) {
				continue
			}
			b, err := json.Marshal(&transcript.Transcript{Kind: "mst.transcript", Key: k, Answer: "legacy"})
			if err != nil {
				t.Fatal(err)
			}
			p := r.path(legacyPath(k))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What a walk meets first of each key, read from the files.
	first := map[transcript.Key]string{}
	err := filepath.WalkDir(r.path(transcriptsDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		tr, err := readTranscriptFile(path)
		if err != nil {
			return err
		}
		if _, ok := first[tr.Key]; !ok {
			first[tr.Key] = tr.Answer
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(keys) {
		t.Fatalf("the folder holds %d keys, want %d", len(first), len(keys))
	}
	got, err := r.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var each []transcript.Key
	if err := r.EachKey(ctx, func(k transcript.Key) error { each = append(each, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, each) {
		t.Errorf("EachKey = %q, want what Keys lists, in its order: %q", each, got)
	}
	less := func(a, b transcript.Key) int { return cmpKey(a, b) }
	sorted := slices.SortedFunc(slices.Values(got), less)
	want := slices.SortedFunc(slices.Values(keys), less)
	if !slices.Equal(sorted, want) {
		t.Errorf("Keys = %q, want each key once: %q", sorted, want)
	}
	read := map[transcript.Key]string{}
	err = r.Transcripts(ctx, func(tr *transcript.Transcript) error {
		if _, ok := read[tr.Key]; ok {
			t.Errorf("Transcripts gave %q twice", tr.Key)
		}
		read[tr.Key] = tr.Answer
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, a := range first {
		if read[k] != a {
			t.Errorf("Transcripts gave the %q file of %q, want the %q one, which a walk meets first", read[k], k, a)
		}
	}
}

func cmpKey(a, b transcript.Key) int {
	if a.Variant != b.Variant {
		return map[bool]int{true: -1, false: 1}[a.Variant < b.Variant]
	}
	if a.Case != b.Case {
		return map[bool]int{true: -1, false: 1}[a.Case < b.Case]
	}
	return a.Trial - b.Trial
}

// TestGradeHistory appends random grades of a few keys, over several
// appends, to set 1 (after an older run's grades.json and a torn line) and
// to a later set: GradeHistory gives every grade, in order, and keeping
// the last it gives of each key ends with what Grades gives.
func TestGradeHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 7))
			r := OpenDir(t.TempDir(), nil)
			random := func() transcript.TrialGrade {
				g := transcript.TrialGrade{Key: transcript.Key{Case: fmt.Sprint("c", rng.IntN(4)), Variant: fmt.Sprint("v", rng.IntN(2)), Trial: 1 + rng.IntN(2)}}
				g.Graded, g.Passed, g.Superseded = rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(5) == 0
				g.Trial.Status = []string{"", transcript.Answered, transcript.Errored}[rng.IntN(3)]
				g.Failed = fmt.Sprint(rng.Uint32())
				return g
			}
			var want []transcript.TrialGrade // every grade, in order
			if seed%2 == 0 {
				var old struct {
					Trials []transcript.TrialGrade `json:"trials"`
				}
				for range 1 + rng.IntN(6) {
					old.Trials = append(old.Trials, random())
				}
				if err := r.writeJSON(oldGradesFile, old); err != nil {
					t.Fatal(err)
				}
				want = append(want, old.Trials...)
			}
			set, err := r.NewGradeSet(ctx, GradeSet{By: "mst grade"})
			if err == nil && set.ID == "1" {
				set, err = r.NewGradeSet(ctx, GradeSet{By: "mst grade"}) // set 1 is grades.jsonl
			}
			if err != nil {
				t.Fatal(err)
			}
			later, err := r.GradeSet(ctx, set.ID)
			if err != nil {
				t.Fatal(err)
			}
			var wantLater []transcript.TrialGrade
			for i := range 2 + rng.IntN(8) {
				var gs []transcript.TrialGrade
				for range 1 + rng.IntN(5) {
					gs = append(gs, random())
				}
				log, into := Grades(r), &want
				if i%2 == 1 {
					log, into = later, &wantLater
				}
				if err := log.AppendGrades(ctx, gs...); err != nil {
					t.Fatal(err)
				}
				*into = append(*into, gs...)
				if i == 0 {
					// A torn line, as a crash leaves it: skipped.
					f, err := os.OpenFile(r.path(gradesFile), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					f.WriteString(`{"case":"c0","variant":"v0","tri`)
					f.Close()
				}
			}
			for _, c := range []struct {
				name string
				log  Grades
				want []transcript.TrialGrade
			}{{"set 1", r, want}, {"set " + set.ID, later, wantLater}} {
				var all []transcript.TrialGrade
				if err := c.log.(GradeHistory).GradeHistory(ctx, func(g transcript.TrialGrade) error { all = append(all, g); return nil }); err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(all, c.want, sameGrade) {
					t.Errorf("%s: GradeHistory = %v, want every grade in order: %v", c.name, all, c.want)
				}
				last := map[transcript.Key]transcript.TrialGrade{}
				for _, g := range all {
					last[g.Key] = g
				}
				latest := map[transcript.Key]transcript.TrialGrade{}
				if err := c.log.Grades(ctx, func(g transcript.TrialGrade) error { latest[g.Key] = g; return nil }); err != nil {
					t.Fatal(err)
				}
				if len(last) != len(latest) {
					t.Errorf("%s: the last grades of GradeHistory are of %d keys, Grades gives %d", c.name, len(last), len(latest))
				}
				for k, g := range latest {
					if !sameGrade(last[k], g) {
						t.Errorf("%s: the last grade of %q GradeHistory gives is %+v, Grades gives %+v", c.name, k, last[k], g)
					}
				}
			}
		})
	}
}

func sameGrade(a, b transcript.TrialGrade) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
