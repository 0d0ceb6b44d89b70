package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/transcript"
)

// legacyIDs are ids whose names in the older layout differ from the
// current ones, long ones split into folders among them.
var legacyIDs = []string{
	"c1", "Q1", "a/b", "%", ".", "..", "ü b", "CON", `C:\x`, "a~0123456789ab",
	strings.Repeat("x", 248), strings.Repeat("ü", 50), strings.Repeat("東", 30),
	strings.Repeat("x", 199) + "/" + strings.Repeat("x", 60),
}

// TestLegacyNames reads a run whose transcripts an older version named
// (url.PathEscape, long names split into folders): every key is listed
// once and read, a write finds the trial taken, and a replacement goes
// where the old file is rather than beside it.
func TestLegacyNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := OpenDir(t.TempDir(), nil)
	var want []transcript.Key
	for _, v := range []string{"terse", "V 1", strings.Repeat("v", 256)} {
		for i, c := range legacyIDs {
			k := transcript.Key{Case: c, Variant: v, Trial: 1 + i%2}
			b, err := json.Marshal(&transcript.Transcript{Kind: "mst.transcript", Key: k, Answer: k.String()})
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
			want = append(want, k)
		}
	}
	count := func() int {
		n := 0
		filepath.WalkDir(r.path(transcriptsDir), func(_ string, d os.DirEntry, _ error) error {
			if d != nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	got, err := r.Keys(ctx)
	less := func(a, b transcript.Key) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(got, less)
	slices.SortFunc(want, less)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Keys of an old run = %q, %v; want %q", got, err, want)
	}
	for _, k := range want {
		tr, err := r.ReadTranscript(ctx, k)
		if err != nil || tr.Answer != k.String() {
			t.Errorf("ReadTranscript(%q) of an old run = %v; want its transcript", k, err)
			continue
		}
		if _, err := r.WriteTranscript(ctx, tr); !errors.Is(err, ErrExists) {
			t.Errorf("WriteTranscript(%q) over an old run's = %v, want ErrExists", k, err)
		}
		tr.Answer = "again"
		if rel, err := r.ReplaceTranscript(ctx, tr); err != nil || rel != legacyPath(k) {
			t.Errorf("ReplaceTranscript(%q) of an old run = %q, %v; want %q", k, rel, err, legacyPath(k))
		}
	}
	if n := count(); n != len(want) {
		t.Errorf("%d files after writes to an old run of %d transcripts", n, len(want))
	}
}

var (
	portable = regexp.MustCompile(`^[A-Za-z0-9%._~-]+$`)
	device   = regexp.MustCompile(`(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)
)

// FuzzFileName checks the names of any two ids: each is at most maxName
// bytes of characters every file system takes, not one Windows refuses,
// gives its id back or says it was cut, and two ids never share a name,
// even where case is ignored.
func FuzzFileName(f *testing.F) {
	for _, id := range legacyIDs {
		f.Add(id, strings.ToLower(id), 1)
	}
	f.Add("nul.txt", "NUL.txt", 3)
	f.Add(strings.Repeat("p", 300)+"1", strings.Repeat("p", 300)+"2", 10)
	f.Fuzz(func(t *testing.T, a, b string, trial int) {
		trial = 1 + min(max(trial, -trial, 0), 1<<30) // (-minint stays negative)
		if trial < 1 {
			trial = 1
		}
		for _, suffix := range []string{"", trialSuffix(trial)} {
			name := fileName(a, suffix)
			switch {
			case len(name) > maxName:
				t.Errorf("fileName(%q, %q) = %d bytes, more than %d", a, suffix, len(name), maxName)
			case !portable.MatchString(name) || strings.HasSuffix(name, ".") || name == "." || name == "..":
				t.Errorf("fileName(%q, %q) = %q, which not every file system takes", a, suffix, name)
			case device.MatchString(name):
				t.Errorf("fileName(%q, %q) = %q, a device on Windows", a, suffix, name)
			}
			id, ok, cut := idOf(strings.TrimSuffix(name, suffix), suffix)
			if ok && id != a || !ok && !cut {
				t.Errorf("idOf(fileName(%q, %q)) = %q, %v, %v", a, suffix, id, ok, cut)
			}
			if a != b && strings.EqualFold(name, fileName(b, suffix)) {
				t.Errorf("fileName(%q) = %q and fileName(%q) = %q: one name where case is ignored", a, name, b, fileName(b, suffix))
			}
		}
		k := transcript.Key{Case: a, Variant: b, Trial: trial}
		got, ok, cut := keyOf(strings.TrimPrefix(transcriptPath(k), transcriptsDir+"/"))
		if ok && got != k || !ok && !cut {
			t.Errorf("keyOf(transcriptPath(%q)) = %q, %v, %v", k, got, ok, cut)
		}
	})
}
