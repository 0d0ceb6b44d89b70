package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/store/storetest"
	"github.com/mst-eval/mst/transcript"
)

func TestDir(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		// A results folder that does not exist yet: Create makes it.
		return store.Dir{Root: filepath.Join(t.TempDir(), "mst-results"), Eval: "weather"}
	})
}

// files returns every file and folder under root, by slash-separated path.
func files(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			out[rel+"/"] = nil
			return nil
		}
		b, err := os.ReadFile(path)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func create(t *testing.T, d store.Dir, id string) *store.DirRun {
	t.Helper()
	r, err := d.Create(t.Context(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteRun(t.Context(), transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: id}); err != nil {
		t.Fatal(err)
	}
	return r.(*store.DirRun)
}

func key(c, v string, n int) transcript.Key { return transcript.Key{Case: c, Variant: v, Trial: n} }

func newTranscript(k transcript.Key, answer string) *transcript.Transcript {
	return &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Key: k, Answer: answer,
		Client: transcript.ClientInfo{Name: "api"}, Outcome: transcript.Outcome{Status: transcript.Answered},
	}
}

// TestDirNoSecretOnDisk walks the whole results folder after a run wrote
// the secret everywhere: no file, and no file name, holds it.
func TestDirNoSecretOnDisk(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	r, err := store.Dir{Root: root, Eval: "weather"}.Create(t.Context(), "secret-run", storetest.Redactor(t))
	if err != nil {
		t.Fatal(err)
	}
	storetest.WriteSecrets(t, r)
	all := files(t, root)
	for name, b := range all {
		storetest.CheckNoSecret(t, "file name "+name, []byte(name))
		storetest.CheckNoSecret(t, name, b)
	}
	for _, name := range []string{"run.json", "eval.yaml", "eval.json", "cases.jsonl", "graders.json", "grades.jsonl"} {
		name = "weather/runs/secret-run/" + name
		if !bytes.Contains(all[name], []byte("[redacted:"+storetest.SecretName+"]")) {
			t.Errorf("%s = %q, want the secret's redaction", name, all[name])
		}
	}
}

// TestDirLayout pins where things are, so runs stored before read the same.
func TestDirLayout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := store.Dir{Root: t.TempDir(), Eval: "weather"}
	r := create(t, d, "run-1")
	if r.Location() != filepath.Join(d.Root, "weather", "runs", "run-1") || r.ID() != "run-1" {
		t.Errorf("run: Location %q, ID %q", r.Location(), r.ID())
	}
	for name, want := range map[string]string{"weather.YML": "eval.yaml", "eval.Json": "eval.json", "noext": "eval.yaml"} {
		data := []byte("# " + name + "\n")
		if err := r.WriteConfig(ctx, name, data); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(r.Location(), want)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("WriteConfig(%q): %s = %q, %v; want %q", name, want, got, err, data)
		}
	}
	for _, c := range []struct {
		k    transcript.Key
		want string
	}{
		{key("c1", "terse", 1), "transcripts/terse/c1.t1.json"},
		{key("q1.b-c_d", "v.2", 3), "transcripts/v.2/q1.b-c_d.t3.json"},
		{key("a/b", "v/1", 12), "transcripts/v%2F1~cbc66753b9c4/a%2Fb~c14cddc033f6.t12.json"},
		{key("%", "..", 1), "transcripts/%2E.~5ec1f7e700f3/%25~bbf3f11cb5b4.t1.json"},
		{key(".", "v", 1), "transcripts/v/%2E~cdb4ee2aea69.t1.json"},
		{key("ü b", "v", 1), "transcripts/v/%C3%BC%20b~00044a1985b0.t1.json"},
		{key("Q1", "v", 1), "transcripts/v/Q1~32d833f348ce.t1.json"},
		{key("CON", "con", 1), "transcripts/con~1143da2bc54c/CON~a3dbc4b644a9.t1.json"},
		{key("con.x", "v", 1), "transcripts/v/%63on.x~9c23cea337f6.t1.json"},
		{key(`C:\x`, "v", 1), "transcripts/v/C%3A%5Cx~520186e299d5.t1.json"},
		{key(strings.Repeat("x", 192), "v", 1), "transcripts/v/" + strings.Repeat("x", 192) + ".t1.json"},
		{key(strings.Repeat("x", 230), "v", 1), "transcripts/v/" + strings.Repeat("x", 179) + "~17f5e6ed54a8.t1.json"},
		{key(strings.Repeat("東", 26), "v", 1), "transcripts/v/" + strings.Repeat("%E6%9D%B1", 19) + "~e1e052ed8c7d.t1.json"},
		{key("c", strings.Repeat("v", 256), 1), "transcripts/" + strings.Repeat("v", 187) + "~fd50c0803252/c.t1.json"},
	} {
		rel, err := r.WriteTranscript(ctx, newTranscript(c.k, "a"))
		if err != nil || rel != c.want {
			t.Errorf("WriteTranscript(%q) = %q, %v; want %q", c.k, rel, err, c.want)
			continue
		}
		if _, err := os.Stat(filepath.Join(r.Location(), filepath.FromSlash(rel))); err != nil {
			t.Errorf("WriteTranscript(%q) = %q, which is not there: %v", c.k, rel, err)
		}
	}
	for name := range files(t, d.Root) {
		for _, seg := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
			if len(seg) > 200 {
				t.Errorf("%s: a name of %d bytes, more than 200", name, len(seg))
			}
		}
		if strings.Contains(name, ".tmp-") {
			t.Errorf("%s: a temporary file left behind", name)
		}
	}
}

// TestDirBadIDsMakeNothing checks a refused id creates nothing, anywhere.
func TestDirBadIDsMakeNothing(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	d := store.Dir{Root: filepath.Join(parent, "results"), Eval: "weather"}
	for _, id := range []string{"../escape", "..", "a/b", `a\b`, ""} {
		if _, err := d.Create(t.Context(), id, nil); err == nil || !strings.Contains(err.Error(), "not a run id") {
			t.Errorf("Create(%q) = %v, want: not a run id", id, err)
		}
	}
	if got := files(t, parent); len(got) != 1 {
		t.Errorf("after refused Creates the folder holds %v, want nothing", slices.Sorted(maps.Keys(got)))
	}
	create(t, d, "run")
	if _, err := d.Create(t.Context(), "run", nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Create(run) twice = %v, want: already exists", err)
	}
}

// TestDirNotARunFolder: a folder without run.json is not a run, and the
// error says what to give instead.
func TestDirNotARunFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := store.OpenRunDir(dir, nil)
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "not a run folder") ||
		!strings.Contains(err.Error(), "run.json") || !strings.Contains(err.Error(), dir) {
		t.Errorf("OpenRunDir(empty folder) = %v, want ErrNotFound saying it is not a run folder, naming it and run.json", err)
	}
	// A run created but not yet recorded is not one either.
	d := store.Dir{Root: t.TempDir(), Eval: "weather"}
	if _, err := d.Create(t.Context(), "r", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(t.Context(), "r", nil); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "not a run folder") {
		t.Errorf("Open of a run without run.json = %v, want: not a run folder", err)
	}
	// OpenDir needs nothing there: a worker writes into it.
	w := store.OpenDir(filepath.Join(t.TempDir(), "shard-0"), nil)
	if _, err := w.WriteTranscript(t.Context(), newTranscript(key("c", "v", 1), "a")); err != nil {
		t.Errorf("WriteTranscript into an empty OpenDir folder = %v", err)
	}
}

// TestDirTempFilesAreNotKeys: files that are not transcripts (a temporary
// file a crash left, someone's notes, a name that is not the one its key
// would have) never show up as keys, nor does a transcript being written.
func TestDirTempFilesAreNotKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := create(t, store.Dir{Root: t.TempDir(), Eval: "weather"}, "run")
	k := key("c1", "v", 1)
	if _, err := r.WriteTranscript(ctx, newTranscript(k, "a")); err != nil {
		t.Fatal(err)
	}
	tdir := filepath.Join(r.Location(), "transcripts")
	for _, name := range []string{
		"v/.tmp-c2.t1.json-123456", "v/.tmp-" + strings.Repeat("x", 64) + "-1", "v/notes.txt", "README.md",
		"v/c3.t01.json", "v/c3.t+1.json", "v/c3.t0.json", "v/c3.tx.json", "v/c%41.t1.json", "v/c%zz.t1.json",
		"v/deeper/c4.t1.json", "v/" + strings.Repeat("x", 10) + "%/.tmp-y.t1.json-77",
	} {
		p := filepath.Join(tdir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ks, err := r.Keys(ctx)
	if err != nil || !slices.Equal(ks, []transcript.Key{k}) {
		t.Errorf("Keys = %v, %v; want only %v", ks, err, k)
	}
	n := 0
	if err := r.Transcripts(ctx, func(*transcript.Transcript) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("Transcripts = %d, %v; want 1", n, err)
	}

	// While writers write, every key listed reads whole.
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				tr := newTranscript(key(strings.Repeat("c", 1+i), string(rune('a'+w)), 1), strings.Repeat("answer ", 5000))
				if _, err := r.WriteTranscript(ctx, tr); err != nil {
					t.Errorf("WriteTranscript = %v", err)
				}
			}
		})
	}
	var rwg sync.WaitGroup
	rwg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			ks, err := r.Keys(ctx)
			if err != nil {
				t.Errorf("Keys while writing = %v", err)
				return
			}
			for _, k := range ks {
				tr, err := r.ReadTranscript(ctx, k)
				if err != nil || tr.Key != k {
					t.Errorf("ReadTranscript(%v) of a listed key while writing = %v", k, err)
					return
				}
			}
		}
	})
	wg.Wait()
	close(done)
	rwg.Wait()
	if ks, err := r.Keys(ctx); err != nil || len(ks) != 1+4*50 {
		t.Errorf("Keys after the writers = %d keys, %v; want %d", len(ks), err, 1+4*50)
	}
}

// TestDirTornGrades: a crash in the middle of an append leaves half a
// line; it is skipped, and the next append starts on a line of its own.
func TestDirTornGrades(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := create(t, store.Dir{Root: t.TempDir(), Eval: "weather"}, "run")
	k1, k2 := key("c1", "v", 1), key("c2", "v", 1)
	first := transcript.TrialGrade{Key: k1, Graded: true, Passed: false}
	if err := r.AppendGrades(ctx, first); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.Location(), "grades.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Half of a regrade of k1 that passed.
	if _, err := f.WriteString(`{"case":"c1","variant":"v","trial":1,"graded":true,"pass`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	grades := func() map[transcript.Key]transcript.TrialGrade {
		t.Helper()
		got := map[transcript.Key]transcript.TrialGrade{}
		if err := r.Grades(ctx, func(g transcript.TrialGrade) error { got[g.Key] = g; return nil }); err != nil {
			t.Fatalf("Grades = %v", err)
		}
		return got
	}
	if diff := cmp.Diff(map[transcript.Key]transcript.TrialGrade{k1: first}, grades(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Grades with a torn last line (-want +got):\n%s", diff)
	}
	second := transcript.TrialGrade{Key: k2, Graded: true, Passed: true}
	if err := r.AppendGrades(ctx, second); err != nil {
		t.Fatalf("AppendGrades after a torn line = %v", err)
	}
	if diff := cmp.Diff(map[transcript.Key]transcript.TrialGrade{k1: first, k2: second}, grades(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Grades after appending to a torn file (-want +got):\n%s", diff)
	}
	b, _ := os.ReadFile(path)
	if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[2], `{"case":"c2"`) {
		t.Errorf("grades.jsonl after the append = %q, want the torn line, then c2's on a line of its own", b)
	}
}

// TestDirOldRun opens a run folder stored by an older MST (grades.json,
// old client names, no graders.json), reads it as the new, and adds to it
// without rewriting what was there.
func TestDirOldRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "oldrun"), os.DirFS(filepath.Join("testdata", "oldrun"))); err != nil {
		t.Fatal(err)
	}
	before := files(t, root)
	r, err := store.Dir{Root: root}.Open(ctx, "oldrun", nil)
	if err != nil {
		t.Fatalf("Open(oldrun) = %v", err)
	}
	rec, err := r.ReadRun(ctx)
	if err != nil || rec.ID != "oldrun" || rec.Counts.Planned != 2 || !rec.Started.Equal(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("ReadRun = %+v, %v", rec, err)
	}
	cases, err := r.ReadCases(ctx)
	wantCases := []transcript.Case{
		{ID: "c1", Input: "hi", Metadata: map[string]any{"weight": json.Number("2")}, Source: "cases.yaml:1"},
		{ID: "c2", Input: "  say hello\n", Source: "cases.yaml:4"},
	}
	if diff := cmp.Diff(wantCases, cases); err != nil || diff != "" {
		t.Errorf("ReadCases = %v (-want +got):\n%s", err, diff)
	}
	if gs, err := r.ReadGraders(ctx); err != nil || len(gs) != 0 {
		t.Errorf("ReadGraders of a run without graders.json = %s, %v; want none", gs, err)
	}
	ks, err := r.Keys(ctx)
	if diff := cmp.Diff([]transcript.Key{key("c1", "terse", 1), key("c2", "terse", 1)}, ks); err != nil || diff != "" {
		t.Errorf("Keys = %v (-want +got):\n%s", err, diff)
	}
	clients := map[string]string{}
	err = r.Transcripts(ctx, func(tr *transcript.Transcript) error {
		if tr.Kind != "mst.transcript" {
			t.Errorf("transcript of %v: kind %q, want mst.transcript", tr.Key, tr.Kind)
		}
		clients[tr.Case] = tr.Client.Name
		return nil
	})
	if diff := cmp.Diff(map[string]string{"c1": "api", "c2": "codex-cli"}, clients); err != nil || diff != "" {
		t.Errorf("Transcripts = %v; clients (-want +got):\n%s", err, diff)
	}
	if tr, err := r.ReadTranscript(ctx, key("c1", "terse", 1)); err != nil || tr.Client.Name != "api" || tr.Answer != "hello" {
		t.Errorf("ReadTranscript(c1) = %+v, %v; want client api", tr, err)
	}
	oldC1 := transcript.TrialGrade{Key: key("c1", "terse", 1), Graded: true, Passed: true, Results: []transcript.Result{{Grader: `answerContains "hello"`, Passed: true}}}
	oldC2 := transcript.TrialGrade{Key: key("c2", "terse", 1)}
	gradesOf := func() map[transcript.Key]transcript.TrialGrade {
		t.Helper()
		got := map[transcript.Key]transcript.TrialGrade{}
		if err := r.Grades(ctx, func(g transcript.TrialGrade) error { got[g.Key] = g; return nil }); err != nil {
			t.Fatalf("Grades = %v", err)
		}
		return got
	}
	if diff := cmp.Diff(map[transcript.Key]transcript.TrialGrade{oldC1.Key: oldC1, oldC2.Key: oldC2}, gradesOf(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Grades of grades.json (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, files(t, root)); diff != "" {
		t.Errorf("reading an old run changed its files (-before +after):\n%s", diff)
	}

	// A regrade is appended; the old grades of other keys still count.
	newC2 := transcript.TrialGrade{Key: oldC2.Key, Trial: transcript.Summary{Status: transcript.Errored, Cause: transcript.CauseClient, Client: "codex-cli"}}
	if err := r.AppendGrades(ctx, newC2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[transcript.Key]transcript.TrialGrade{oldC1.Key: oldC1, oldC2.Key: newC2}, gradesOf(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Grades after a regrade of an old run (-want +got):\n%s", diff)
	}
	after := files(t, root)
	if !bytes.Equal(before["oldrun/grades.json"], after["oldrun/grades.json"]) {
		t.Errorf("appending grades rewrote grades.json")
	}
}

// TestDirNamesPortable writes a transcript for every odd id under every
// odd variant and checks each name it made is one every common file system
// takes as it is: at most 200 bytes, printable ASCII without the bytes
// Windows refuses, not "." or "..", not ending in "." or " ", not a device
// name of Windows, and no two in one folder that differ only in case.
func TestDirNamesPortable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := store.Dir{Root: t.TempDir(), Eval: "weather"}
	r := create(t, d, "run")
	ids := storetest.OddIDs()
	for _, v := range []string{"terse", "Terse", "TERSE", "CON", "a:b", strings.Repeat("東", 30), strings.Repeat("v", 230)} {
		for _, c := range ids {
			if _, err := r.WriteTranscript(ctx, newTranscript(key(c, v, 1), "a")); err != nil {
				t.Errorf("WriteTranscript(%q) = %v", key(c, v, 1), err)
			}
		}
	}
	devices := regexp.MustCompile(`(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)
	folded := map[string]string{} // folder + lower-case name -> the name
	for name := range files(t, filepath.Join(r.Location(), "transcripts")) {
		name = strings.TrimSuffix(name, "/")
		if name == "." {
			continue // the transcripts folder itself
		}
		dir, base := path.Split(name)
		switch {
		case len(base) > 200:
			t.Errorf("%s: a name of %d bytes, more than 200", name, len(base))
		case base == "." || base == ".." || strings.HasSuffix(base, ".") || strings.HasSuffix(base, " "):
			t.Errorf("%q: a name Windows refuses", name)
		case strings.IndexFunc(base, func(c rune) bool { return c < 0x20 || c >= 0x7f || strings.ContainsRune(`<>:"/\|?*`, c) }) >= 0:
			t.Errorf("%q: a byte some file system refuses or changes", name)
		case devices.MatchString(base):
			t.Errorf("%q: a device name on Windows", name)
		}
		f := dir + strings.ToLower(base)
		if other, ok := folded[f]; ok {
			t.Errorf("%q and %q: one name where case is ignored", other, name)
		}
		folded[f] = name
	}
}
