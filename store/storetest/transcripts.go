package storetest

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// checkRel fails t unless rel, where a write says it stored a transcript,
// is a slash-separated path inside the run.
func checkRel(t *testing.T, k transcript.Key, rel string) {
	t.Helper()
	if rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "/") ||
		rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, `\`) {
		t.Errorf("write of %v = path %q, want a slash-separated path inside the run", k, rel)
	}
}

func testTranscripts(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	k1 := transcript.Key{Case: "c1", Variant: "terse", Trial: 1}
	if _, err := r.ReadTranscript(ctx, k1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadTranscript of a missing transcript = %v, want ErrNotFound", err)
	}
	if ks := keys(t, r); len(ks) != 0 {
		t.Errorf("Keys of a new run = %v, want none", ks)
	}
	if got := allTranscripts(t, r); len(got) != 0 {
		t.Errorf("Transcripts of a new run visited %d, want none", len(got))
	}

	want := map[transcript.Key]*transcript.Transcript{}
	paths := map[string]transcript.Key{}
	for _, k := range []transcript.Key{
		k1, {Case: "c1", Variant: "terse", Trial: 2}, {Case: "c1", Variant: "chatty", Trial: 1},
		{Case: "c2", Variant: "terse", Trial: 1}, {Case: "c1", Variant: "terse", Trial: 10},
	} {
		tr := sampleTranscript(k, "It is sunny in Oslo: "+k.String())
		if k.Trial == 2 {
			tr.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseServer, Detail: "server exited"}
			tr.Answer = ""
		}
		rel, err := r.WriteTranscript(ctx, tr)
		if err != nil {
			t.Fatalf("WriteTranscript(%v) = %v", k, err)
		}
		checkRel(t, k, rel)
		if other, ok := paths[rel]; ok {
			t.Errorf("WriteTranscript(%v) = %q, the path of %v", k, rel, other)
		}
		paths[rel] = k
		want[k] = tr
	}
	for k, tr := range want {
		got, err := r.ReadTranscript(ctx, k)
		if err != nil {
			t.Fatalf("ReadTranscript(%v) = %v", k, err)
		}
		if diff := cmp.Diff(tr, got, opts); diff != "" {
			t.Errorf("ReadTranscript(%v) (-want +got):\n%s", k, diff)
		}
	}
	wantKeys := slices.SortedFunc(maps.Keys(want), compareKeys)
	if diff := cmp.Diff(wantKeys, keys(t, r)); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, allTranscripts(t, r), opts); diff != "" {
		t.Errorf("Transcripts (-want +got):\n%s", diff)
	}
	if _, err := r.ReadTranscript(ctx, transcript.Key{Case: "c2", Variant: "terse", Trial: 2}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadTranscript of a missing trial = %v, want ErrNotFound", err)
	}
}

func testTranscriptsStop(t *testing.T, s store.Store) {
	r := create(t, s, "run", nil)
	for i := range 3 {
		if _, err := r.WriteTranscript(t.Context(), sampleTranscript(transcript.Key{Case: fmt.Sprint("c", i), Variant: "v", Trial: 1}, "a")); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := r.Transcripts(t.Context(), func(*transcript.Transcript) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Transcripts with fn failing = %v after %d calls, want fn's error after 1", err, n)
	}
}

func testTranscriptNoOverwrite(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	k := transcript.Key{Case: "c1", Variant: "v", Trial: 1}
	first := sampleTranscript(k, "first")
	if _, err := r.WriteTranscript(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteTranscript(ctx, sampleTranscript(k, "second")); !errors.Is(err, store.ErrExists) {
		t.Errorf("WriteTranscript of a stored trial = %v, want ErrExists", err)
	}
	// Through another handle of the same run too.
	o, err := s.Open(ctx, "run", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.WriteTranscript(ctx, sampleTranscript(k, "third")); !errors.Is(err, store.ErrExists) {
		t.Errorf("WriteTranscript of a stored trial through Open = %v, want ErrExists", err)
	}
	got, err := r.ReadTranscript(ctx, k)
	if err != nil || got.Answer != "first" {
		t.Errorf("ReadTranscript after a refused write = %v, %v; want the first", got, err)
	}
}

// testTranscriptOneWriterWins has many writers store one trial at once:
// one wins, the others get ErrExists, and the winner's is stored.
func testTranscriptOneWriterWins(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	k := transcript.Key{Case: "c1", Variant: "v", Trial: 1}
	const writers = 16
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			tr := sampleTranscript(k, fmt.Sprint("writer ", i))
			tr.Prompt = strings.Repeat(fmt.Sprint(i, " "), 10000)
			_, errs[i] = r.WriteTranscript(ctx, tr)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("WriteTranscript by writers %d and %d both succeeded, want one", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrExists):
			t.Errorf("WriteTranscript by writer %d = %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("WriteTranscript by %d writers: none succeeded", writers)
	}
	got, err := r.ReadTranscript(ctx, k)
	if err != nil || got.Answer != fmt.Sprint("writer ", winner) || got.Prompt != strings.Repeat(fmt.Sprint(winner, " "), 10000) {
		t.Errorf("ReadTranscript = a transcript not the winner's (writer %d), %v", winner, err)
	}
	if ks := keys(t, r); len(ks) != 1 {
		t.Errorf("Keys = %v, want %v once", ks, k)
	}
}

func testReplaceTranscript(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	k := transcript.Key{Case: "c1", Variant: "v", Trial: 1}
	errored := sampleTranscript(k, "")
	errored.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseProvider, Detail: "429"}
	rel, err := r.WriteTranscript(ctx, errored)
	if err != nil {
		t.Fatal(err)
	}
	again := sampleTranscript(k, "sunny")
	rel2, err := r.ReplaceTranscript(ctx, again)
	if err != nil {
		t.Fatalf("ReplaceTranscript = %v", err)
	}
	if rel2 != rel {
		t.Errorf("ReplaceTranscript = path %q, WriteTranscript = %q; want one path per trial", rel2, rel)
	}
	got, err := r.ReadTranscript(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(again, got, opts); diff != "" {
		t.Errorf("ReadTranscript after ReplaceTranscript (-want +got):\n%s", diff)
	}
	// Replacing a trial that has none stores it.
	k2 := transcript.Key{Case: "c2", Variant: "v", Trial: 1}
	if _, err := r.ReplaceTranscript(ctx, sampleTranscript(k2, "new")); err != nil {
		t.Fatalf("ReplaceTranscript of a new trial = %v", err)
	}
	if diff := cmp.Diff([]transcript.Key{k, k2}, keys(t, r)); diff != "" {
		t.Errorf("Keys after replacing (-want +got):\n%s", diff)
	}
	if got := allTranscripts(t, r); len(got) != 2 || got[k].Answer != "sunny" {
		t.Errorf("Transcripts after replacing = %d, want 2 with the replacement", len(got))
	}
}

// oddIDs are case ids and variant names a store must keep apart and give
// back as they were, however it names what it stores.
var oddIDs = []string{
	"plain", "a/b", "a%2Fb", "a%2fb", "a%252Fb", "%", "%%", "%zz", "%2E", ".", "..", "...", ".hidden",
	"a.t1", "c.t1.json", "a.json", " ", "two  spaces", "trailing ", "a b", "a%20b", "a+b",
	"ünïcødé", "cafe\u0301", "café", "東京の天気", "emoji 🌦️", `back\slash`, `a:b*c?d"e<f>g|h`,
	"tab\there", "new\nline", "ctl\x01", "~", "-dash", "CON", "a/../../etc/passwd", "/abs",
	strings.Repeat("x", 250), strings.Repeat("y", 300) + "/" + strings.Repeat("z", 10),
	strings.Repeat("ü", 120), strings.Repeat("東京", 60), strings.Repeat("%", 100),
	strings.Repeat("/", 200), strings.Repeat(".", 201), strings.Repeat("a", 199) + "/b",
	// Ids that differ only in case, which macOS and Windows file systems
	// take for one name.
	"Case", "case", "CASE", "cASE", "Q1", "q1",
	// Names Windows keeps or refuses, and path-like ids.
	"con", "nul.txt", "Aux", "com1", "LPT9.log", `C:\x`, "c:", "../x", "x/..", "./x", "a.", "a ",
	// Control characters, one a terminal escape. (Not bytes that are not
	// UTF-8: a transcript is JSON, which cannot hold them; datasets refuse
	// such ids.)
	"\x1b[2J\x1b[H", "nul\x00byte", "\x7f",
	// Long ids: over the limit, cut to one same prefix and told apart
	// only by what was cut.
	strings.Repeat("x", 230), strings.Repeat("東", 26), strings.Repeat("東", 500),
	strings.Repeat("p", 300) + "1", strings.Repeat("p", 300) + "2", strings.Repeat("P", 300) + "1",
	strings.Repeat("p", 300) + "~0123456789ab", "a~0123456789ab", "A~0123456789AB",
}

// OddIDs are case ids and variant names a store must keep apart and give
// back as they were: separators, escapes, control characters, invalid
// UTF-8, names file systems refuse or fold together, and long names.
func OddIDs() []string { return slices.Clone(oddIDs) }

// oddVariants are variant names, a smaller set: every case is stored
// under every variant.
var oddVariants = []string{"terse", "Terse", "v/1", "..", "%2F", "ünï", "CON", strings.Repeat("v", 260), strings.Repeat("ß", 140) + "."}

func testEscapedKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run", nil)
	want := map[transcript.Key]*transcript.Transcript{}
	paths := map[string]transcript.Key{}
	for _, v := range oddVariants {
		for i, c := range oddIDs {
			k := transcript.Key{Case: c, Variant: v, Trial: 1 + i%3*5}
			tr := sampleTranscript(k, k.String())
			rel, err := r.WriteTranscript(ctx, tr)
			if err != nil {
				t.Errorf("WriteTranscript(%q) = %v", k, err)
				continue
			}
			checkRel(t, k, rel)
			if other, ok := paths[rel]; ok {
				t.Errorf("WriteTranscript(%q) = %q, the path of %q", k, rel, other)
			}
			paths[rel] = k
			want[k] = tr
		}
	}
	for k, tr := range want {
		got, err := r.ReadTranscript(ctx, k)
		if err != nil {
			t.Errorf("ReadTranscript(%q) = %v", k, err)
			continue
		}
		if got.Key != k || got.Answer != tr.Answer {
			t.Errorf("ReadTranscript(%q) = the transcript of %q", k, got.Key)
		}
	}
	wantKeys := slices.SortedFunc(maps.Keys(want), compareKeys)
	if diff := cmp.Diff(wantKeys, keys(t, r)); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
	got := allTranscripts(t, r)
	if diff := cmp.Diff(wantKeys, slices.SortedFunc(maps.Keys(got), compareKeys)); diff != "" {
		t.Errorf("keys of Transcripts (-want +got):\n%s", diff)
	}
	for k, tr := range got {
		if tr.Answer != k.String() {
			t.Errorf("Transcripts gave %q the transcript of %q", k, tr.Answer)
		}
	}
}
