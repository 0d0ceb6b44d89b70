package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestDirDamagedTranscripts: a transcript file cut short anywhere (what a
// crash or a power cut leaves) counts as missing: Keys and Transcripts
// leave it out, ReadTranscript says ErrNotFound and ErrDamaged, and
// WriteTranscript puts a whole one in its place.
func TestDirDamagedTranscripts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := create(t, store.Dir{Root: t.TempDir(), Eval: "weather"}, "run")
	whole := key("whole", "v", 1)
	if _, err := r.WriteTranscript(ctx, newTranscript(whole, "fine")); err != nil {
		t.Fatal(err)
	}
	probe := key("probe", "v", 1)
	rel, err := r.WriteTranscript(ctx, newTranscript(probe, strings.Repeat("long answer ", 50)))
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(filepath.Join(r.Location(), rel))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(r.Location(), rel))
	for _, n := range []int{0, 1, len(full) / 3, len(full) / 2, len(full) - 2, len(full) - 12} {
		k := key("cut", "v", n+1)
		path := filepath.Join(r.Location(), "transcripts", "v", "cut.t"+strconv.Itoa(n+1)+".json")
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		// Keys reads only a file's last bytes: a file cut right after a
		// nested object's "}" is listed, and found damaged when read.
		if ks, err := r.Keys(ctx); err != nil || (!strings.HasSuffix(string(full[:n]), "}") && (len(ks) != 1 || ks[0] != whole)) {
			t.Errorf("cut to %d of %d bytes: Keys = %v, %v; want only %v", n, len(full), ks, err, whole)
		}
		n2 := 0
		if err := r.Transcripts(ctx, func(*transcript.Transcript) error { n2++; return nil }); err != nil || n2 != 1 {
			t.Errorf("cut to %d bytes: Transcripts visited %d, %v; want 1, nil", n, n2, err)
		}
		_, err := r.ReadTranscript(ctx, k)
		if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--resume") {
			t.Errorf("cut to %d bytes: ReadTranscript = %v, want ErrNotFound and ErrDamaged naming the file and --resume", n, err)
		}
		if _, err := r.WriteTranscript(ctx, newTranscript(k, "again")); err != nil {
			t.Errorf("cut to %d bytes: WriteTranscript = %v, want the damaged file replaced", n, err)
		}
		if got, err := r.ReadTranscript(ctx, k); err != nil || got.Answer != "again" {
			t.Errorf("cut to %d bytes: after WriteTranscript, ReadTranscript = %v, %v", n, got, err)
		}
		os.Remove(path)
	}
	// A whole transcript is still written once.
	if _, err := r.WriteTranscript(ctx, newTranscript(whole, "other")); !errors.Is(err, store.ErrExists) {
		t.Errorf("WriteTranscript over a whole transcript = %v, want ErrExists", err)
	}
}

// TestDirDamagedRunRecord: a run.json cut short is read from its copy; when
// both are damaged, ReadRun says what is wrong, naming both files.
func TestDirDamagedRunRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := create(t, store.Dir{Root: t.TempDir(), Eval: "weather"}, "run")
	rec := transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "run", Collect: transcript.CollectComplete, Variants: []string{"v"}, Trials: 2}
	if err := r.WriteRun(ctx, rec); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(r.Location(), "run.json")
	b, _ := os.ReadFile(main)
	for _, n := range []int{0, 1, len(b) / 2, len(b) - 3} {
		os.WriteFile(main, b[:n], 0o644)
		got, err := r.ReadRun(ctx)
		if err != nil || got.ID != "run" || got.Trials != 2 || got.Collect != transcript.CollectComplete || !strings.Contains(got.Note, "damaged") {
			t.Errorf("run.json cut to %d bytes: ReadRun = %+v, %v; want the record from its copy, with a note", n, got, err)
		}
	}
	os.WriteFile(filepath.Join(r.Location(), "run.prev.json"), b[:5], 0o644)
	os.WriteFile(main, nil, 0o644)
	_, err := r.ReadRun(ctx)
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "run.json") || !strings.Contains(err.Error(), "run.prev.json") {
		t.Errorf("ReadRun with both copies damaged = %v, want ErrDamaged naming both", err)
	}
	// Writing again heals both.
	if err := r.WriteRun(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadRun(ctx); err != nil || got.Note != "" {
		t.Errorf("ReadRun after WriteRun = %+v, %v", got, err)
	}
}

// TestDirHostileRunRecord: a run.json that is there but is not a record
// MST can trust (cut short, not UTF-8, nested too deep, of the wrong
// shape, or larger than the bound) is never taken as the record: ReadRun
// reads the copy and notes it, and with both copies so, it fails as
// damaged naming both files.
func TestDirHostileRunRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rec := transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "run", Collect: transcript.CollectComplete, Variants: []string{"v"}, Trials: 2}
	good, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	// Valid JSON padded with spaces past the bound: only the size is wrong.
	oversized := append(append([]byte{}, good...), bytes.Repeat([]byte(" "), 32<<20)...)
	bad := map[string][]byte{
		"truncated":   good[:len(good)/2],
		"non-UTF-8":   bytes.Replace(good, []byte(`"v"`), []byte("\"v\xff\xfe\""), 1),
		"lone NUL":    bytes.Replace(good, []byte(`"v"`), []byte("\"v\x00\""), 1),
		"deep":        append(bytes.Repeat([]byte("["), 100000), bytes.Repeat([]byte("]"), 100000)...),
		"wrong shape": []byte(`{"kind":"mst.run","id":"run","variants":5}`),
		"not object":  []byte(`[1,2,3]`),
		"oversized":   oversized,
	}
	for name, data := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := create(t, store.Dir{Root: t.TempDir(), Eval: "weather"}, "run")
			if err := r.WriteRun(ctx, rec); err != nil {
				t.Fatal(err)
			}
			main := filepath.Join(r.Location(), "run.json")
			if err := os.WriteFile(main, data, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := r.ReadRun(ctx)
			if err != nil || got.ID != "run" || got.Trials != 2 || !slices.Equal(got.Variants, []string{"v"}) || !strings.Contains(got.Note, "damaged") {
				t.Errorf("ReadRun = %+v, %v; want the record from run.prev.json, with a note", got, err)
			}
			if err := os.WriteFile(filepath.Join(r.Location(), "run.prev.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = r.ReadRun(ctx)
			if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "run.json") || !strings.Contains(err.Error(), "run.prev.json") {
				t.Errorf("ReadRun with both copies so = %v, want ErrDamaged naming both", err)
			}
			if err != nil && strings.Contains(err.Error(), "invalid character") {
				t.Errorf("ReadRun error quotes the JSON decoder: %v", err)
			}
		})
	}
}
