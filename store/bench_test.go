package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// BenchmarkWriteTranscript measures storing one transcript of about 8 KB
// durably (temporary file, fsync, link, fsync of the folder).
func BenchmarkWriteTranscript(b *testing.B) {
	r, err := store.Dir{Root: b.TempDir(), Eval: "weather"}.Create(b.Context(), "run", nil)
	if err != nil {
		b.Fatal(err)
	}
	answer := strings.Repeat("sunny and cold, ", 500)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := r.WriteTranscript(b.Context(), newTranscript(key(fmt.Sprint("case-", i), "v", 1), answer)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendGrade measures appending one grade to grades.jsonl, synced.
func BenchmarkAppendGrade(b *testing.B) {
	r, err := store.Dir{Root: b.TempDir(), Eval: "weather"}.Create(b.Context(), "run", nil)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if err := r.AppendGrades(b.Context(), transcript.TrialGrade{Key: key(fmt.Sprint("case-", i), "v", 1), Graded: true, Passed: true}); err != nil {
			b.Fatal(err)
		}
	}
}
