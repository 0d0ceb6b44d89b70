package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/transcript"
)

func TestTranscriptPathIsSafe(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"plain", "a/b", "../../etc/passwd", "..", ".", "sp ace", "ünï", "a%2Fb"} {
		p := TranscriptPath(transcript.Key{Case: id, Variant: "v/x", Trial: 2})
		clean := filepath.ToSlash(filepath.Clean(p))
		if clean != p || strings.Count(p, "/") != 2 || !strings.HasPrefix(p, "transcripts/") {
			t.Errorf("TranscriptPath(%q) = %q, want one file two levels under transcripts/", id, p)
		}
	}
	a := TranscriptPath(transcript.Key{Case: "a/b", Variant: "v", Trial: 1})
	b := TranscriptPath(transcript.Key{Case: "a%2Fb", Variant: "v", Trial: 1})
	if a == b {
		t.Errorf("distinct case ids share the path %q", a)
	}
}

func TestWriteAtomicAndRead(t *testing.T) {
	t.Parallel()
	r, err := Create(t.TempDir(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	tr := &transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Key: transcript.Key{Case: "c", Variant: "v", Trial: 1}, Answer: "hi"}
	p, err := r.WriteTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadTranscript(filepath.Join(r.Dir, p))
	if err != nil || got.Answer != "hi" || got.Key != tr.Key {
		t.Fatalf("ReadTranscript = %+v, %v", got, err)
	}
	n := 0
	if err := r.Transcripts(func(*transcript.Transcript) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("Transcripts visited %d (err %v), want 1", n, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(r.Dir, "transcripts", "v", ".tmp-*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

// TestReadOldNames reads a transcript stored with old names as the new ones,
// without touching the file.
func TestReadOldNames(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "oldrun", "transcripts", "terse", "c1.t1.json")
	before, _ := os.ReadFile(path)
	tr, err := ReadTranscript(path)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Client.Name != "api" || tr.Kind != "mst.transcript" {
		t.Errorf("read client %q kind %q, want api and mst.transcript", tr.Client.Name, tr.Kind)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Errorf("reading rewrote the file")
	}
}
