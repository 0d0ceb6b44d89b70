package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/store"
)

type mstResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) mstResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), args, cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ()})
	return mstResult{code, stdout.String(), stderr.String()}
}

// TestRunS3 runs a small eval with --results s3://… against gofakes3 on
// loopback, the credentials and endpoint from the AWS variables as a user
// sets them; then reports it from its URL, lists the eval's runs, and
// resumes it from the URL after one of its transcripts is lost.
func TestRunS3(t *testing.T) {
	backend := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer ts.Close()
	if err := backend.CreateBucket("evals"); err != nil {
		t.Fatal(err)
	}
	// Only the AWS chain: variables, no files of this machine.
	home := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test-key-id", "AWS_SECRET_ACCESS_KEY": "test-secret-key", "AWS_REGION": "us-east-1",
		"AWS_ENDPOINT_URL": ts.URL, "AWS_CONFIG_FILE": filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"), "AWS_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	evalFile := quickstartCopy(t)
	store := "s3://evals/team/mst?use_path_style=true"

	r := runCLI(t, "run", evalFile, "--results", store, "--limit", "3", "--trials", "1", "--json")
	if r.code != 0 {
		t.Fatalf("mst run --results %s exited %d\n%s", store, r.code, r.stderr)
	}
	m := regexp.MustCompile(`results: (s3://evals/team/mst/quickstart/runs/(quickstart-[^/\s]+)/\?use_path_style=true)\n`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("mst run printed no results: s3://evals/team/mst/quickstart/runs/RUN-ID/ line:\n%s", r.stderr)
	}
	runURL, runID := m[1], m[2]
	prefix := "team/mst/quickstart/runs/" + runID + "/"
	list, err := backend.ListBucket("evals", &gofakes3.Prefix{HasPrefix: true, Prefix: prefix}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var transcripts []string
	for _, o := range list.Contents {
		if strings.HasPrefix(o.Key, prefix+"transcripts/") {
			transcripts = append(transcripts, o.Key)
		}
	}
	if len(transcripts) != 6 {
		t.Fatalf("the bucket holds %d transcripts under %s, want 6 (3 cases x 2 variants): %v", len(transcripts), prefix, list.Contents)
	}
	if _, err := os.Stat("s3:"); err == nil {
		t.Errorf("mst run made a folder named s3:")
	}

	// mst report from the run's URL, on what the bucket holds.
	rep := runCLI(t, "report", runURL, "--json")
	if rep.code != 0 {
		t.Fatalf("mst report %s exited %d\n%s", runURL, rep.code, rep.stderr)
	}
	var report struct {
		Variants []struct {
			Variant string `json:"variant"`
			Graded  int    `json:"graded"`
		} `json:"variants"`
	}
	if err := json.Unmarshal([]byte(rep.stdout), &report); err != nil || len(report.Variants) != 2 || report.Variants[0].Graded != 3 {
		t.Fatalf("mst report %s = %+v, %v; want 2 variants of 3 graded trials\n%s", runURL, report, err, rep.stdout)
	}

	// The eval's runs, newest first.
	second := runCLI(t, "run", evalFile, "--results", store, "--limit", "1", "--trials", "1", "--json")
	if second.code != 0 {
		t.Fatalf("second mst run exited %d\n%s", second.code, second.stderr)
	}
	ls := runCLI(t, "report", "s3://evals/team/mst/quickstart/runs/?use_path_style=true")
	if ls.code != 0 {
		t.Fatalf("mst report …/runs/ exited %d\n%s", ls.code, ls.stderr)
	}
	lines := strings.Split(strings.TrimSpace(ls.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "RUN") || !strings.Contains(lines[2], runID) || strings.Contains(lines[1], runID) {
		t.Errorf("mst report …/runs/ = %q, want a header, then the second run, then %s", ls.stdout, runID)
	}

	// A lost transcript is missing: --resume from the URL runs it again,
	// into the bucket.
	lost := transcripts[0]
	if _, err := backend.DeleteObject("evals", lost); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, "run", "--resume", runURL, "--json")
	if res.code != 0 {
		t.Fatalf("mst run --resume %s exited %d\n%s", runURL, res.code, res.stderr)
	}
	if _, err := backend.HeadObject("evals", lost); err != nil {
		t.Errorf("after --resume, %s is not in the bucket: %v", lost, err)
	}
}

// TestResultsURLRefused: a location written as a URL that MST cannot serve
// is refused before anything runs, never taken for a folder.
func TestResultsURLRefused(t *testing.T) {
	evalFile := quickstartCopy(t)
	wd := t.TempDir()
	t.Chdir(wd)
	for _, loc := range []string{"gs:bucket/p", "gs:/bucket/p", "azblob://container/p", "http://example.com/runs", "ftp://host/x",
		"s3://AKIAEXAMPLE:hunter2@bucket/p", "gs://bucket/p?access_id=me", "s3://bucket/p?secret=x", "file://otherhost/runs"} {
		r := runCLI(t, "run", evalFile, "--results", loc)
		if r.code != 2 {
			t.Errorf("mst run --results %s exited %d, want 2\n%s", loc, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "hunter2") {
			t.Errorf("mst run --results %s repeats the password: %s", loc, r.stderr)
		}
		if !strings.Contains(r.stderr, "gs://BUCKET/PREFIX") && !strings.Contains(r.stderr, "credentials") && !strings.Contains(r.stderr, "query") && !strings.Contains(r.stderr, "name the bucket") {
			t.Errorf("mst run --results %s: %s; want it to say what MST serves", loc, r.stderr)
		}
	}
	ents, _ := os.ReadDir(wd)
	for _, e := range ents {
		t.Errorf("a refused --results left %s in the working folder", e.Name())
	}
	// The config's results.store is refused the same way.
	b, _ := os.ReadFile(evalFile)
	os.WriteFile(evalFile, append(b, []byte("results: {store: 'azblob://c/p'}\n")...), 0o644)
	if r := runCLI(t, "run", evalFile); r.code != 2 || !strings.Contains(r.stderr, "azblob") {
		t.Errorf("mst run with results.store azblob:// = exit %d\n%s", r.code, r.stderr)
	}
	// A folder with a colon in its name is written as a path.
	if r := runCLI(t, "run", evalFile, "--results", "./gs:x", "--limit", "1", "--trials", "1"); r.code != 0 {
		t.Errorf("mst run --results ./gs:x exited %d\n%s", r.code, r.stderr)
	} else if _, err := os.Stat(filepath.Join(wd, "gs:x")); err != nil {
		t.Errorf("--results ./gs:x made no folder gs:x: %v", err)
	}
}

// runFolderLine is the results: line mst run prints for a run in a
// results folder, in the layout ROOT/EVAL/runs/ID.
var runFolderLine = regexp.MustCompile(`(?m)^results: (.*/quickstart/runs/(quickstart-[^/\s]+))$`)

// runInto runs two trials of the quickstart into results (the default
// folder when results is "") and returns the run's folder and id.
func runInto(t *testing.T, evalFile, results string) (folder, id string) {
	t.Helper()
	args := []string{"run", evalFile, "--limit", "1", "--trials", "1", "--json"}
	if results != "" {
		args = append(args, "--results", results)
	}
	r := runCLI(t, args...)
	if r.code != 0 {
		t.Fatalf("mst %v exited %d\n%s", args, r.code, r.stderr)
	}
	m := runFolderLine.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("mst %v printed no results: …/quickstart/runs/RUN-ID line:\n%s", args, r.stderr)
	}
	if st, err := os.Stat(filepath.Join(m[1], "run.json")); err != nil || st.IsDir() {
		t.Fatalf("the folder mst run printed, %s, has no run.json: %v", m[1], err)
	}
	return m[1], m[2]
}

// viewServes runs mst view ref until it prints its address, then stops it.
func viewServes(t *testing.T, ref string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- cli.Main(ctx, []string{"view", ref}, cli.Stdio{Out: pw, Err: &stderr, Env: os.Environ()})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	cancel()
	code := <-done
	if err != nil || !strings.Contains(line, "http://127.0.0.1:") || code != 0 {
		t.Errorf("mst view %s: printed %q (%v), exit %d\n%s", ref, line, err, code, stderr.String())
	}
}

// TestResultsFolderLayout: mst run keeps a run in RESULTS/EVAL/runs/ID
// (the eval's name as the bucket store spells it), with --results and by
// default; every command that takes a run takes one of this layout and
// one an older version made at RESULTS/ID, by folder and by id; an id
// found twice is refused naming both; RESULTS/EVAL/runs/ lists the eval's
// runs as a bucket's do; and a resumed old run stays where it is.
func TestResultsFolderLayout(t *testing.T) {
	evalFile := quickstartCopy(t)
	wd := t.TempDir()
	t.Chdir(wd)
	other := filepath.Join(t.TempDir(), "my results")
	if f, _ := runInto(t, evalFile, other); filepath.Dir(filepath.Dir(f)) != filepath.Join(other, store.SafeName("quickstart")) {
		t.Errorf("--results %s: run in %s, want %s/quickstart/runs/RUN-ID", other, f, other)
	}
	newDir, newID := runInto(t, evalFile, "")
	if want := filepath.Join("mst-results", "quickstart", "runs", newID); newDir != want {
		t.Errorf("mst run printed %s, want %s", newDir, want)
	}
	// A run as an older version kept it: RESULTS/ID.
	movedDir, oldID := runInto(t, evalFile, "")
	oldDir := filepath.Join("mst-results", oldID)
	if err := os.Rename(movedDir, oldDir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(newDir, "transcripts"))
	if len(ents) == 0 {
		t.Fatalf("%s has no transcripts", newDir)
	}
	variant := ents[0].Name()
	files, _ := os.ReadDir(filepath.Join(newDir, "transcripts", variant))
	if len(files) == 0 {
		t.Fatalf("%s has no transcripts of %s", newDir, variant)
	}
	caseID := strings.TrimSuffix(files[0].Name(), ".t1.json")

	for _, ref := range []string{newDir, newID, oldDir, oldID} {
		for _, args := range [][]string{
			{"report", ref, "--json"},
			{"show", ref, variant, caseID},
			{"grade", ref},
			{"compare", ref, newDir},
			{"compare", oldDir, ref},
		} {
			if r := runCLI(t, args...); r.code != 0 {
				t.Errorf("mst %v exited %d\n%s", args, r.code, r.stderr)
			}
		}
		viewServes(t, ref)
	}
	if r := runCLI(t, "grade", newID, "--results", filepath.Join(wd, "mst-results")); r.code != 0 {
		t.Errorf("mst grade ID --results exited %d\n%s", r.code, r.stderr)
	}

	// A resume of the old run, by id, writes into its folder and makes no
	// new one.
	lost := filepath.Join(oldDir, "transcripts", variant, files[0].Name())
	if err := os.Remove(lost); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "run", "--resume", oldID, "--json"); r.code != 0 {
		t.Fatalf("mst run --resume %s exited %d\n%s", oldID, r.code, r.stderr)
	} else if !strings.Contains(r.stderr, "results: "+oldDir+"\n") {
		t.Errorf("mst run --resume %s does not print its folder %s:\n%s", oldID, oldDir, r.stderr)
	}
	if _, err := os.Stat(lost); err != nil {
		t.Errorf("after --resume %s, %s is not back: %v", oldID, lost, err)
	}
	// A resume of a new run by id, with --results, stays where it is.
	lostNew := filepath.Join(newDir, "transcripts", variant, files[0].Name())
	os.Remove(lostNew)
	if r := runCLI(t, "run", "--resume", newID, "--results", "mst-results", "--json"); r.code != 0 {
		t.Fatalf("mst run --resume %s exited %d\n%s", newID, r.code, r.stderr)
	}
	if _, err := os.Stat(lostNew); err != nil {
		t.Errorf("after --resume %s, %s is not back: %v", newID, lostNew, err)
	}
	runs, _ := os.ReadDir(filepath.Join("mst-results", "quickstart", "runs"))
	if len(runs) != 1 {
		t.Errorf("after the resumes mst-results/quickstart/runs holds %d runs, want 1", len(runs))
	}

	// The eval's runs, newest first, as for a bucket.
	second, secondID := runInto(t, evalFile, "")
	listing := filepath.Join("mst-results", "quickstart", "runs") + "/"
	ls := runCLI(t, "report", listing)
	lines := strings.Split(strings.TrimSpace(ls.stdout), "\n")
	if ls.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "RUN") || !strings.Contains(lines[0], "FOLDER") ||
		!strings.HasPrefix(lines[1], secondID) || !strings.HasSuffix(lines[1], second) || !strings.HasPrefix(lines[2], newID) {
		t.Errorf("mst report %s = exit %d %q, want a header, then %s, then %s\n%s", listing, ls.code, ls.stdout, secondID, newID, ls.stderr)
	}
	lsj := runCLI(t, "report", strings.TrimSuffix(listing, "/"), "--json")
	var rows []struct{ ID, Folder string }
	if err := json.Unmarshal([]byte(lsj.stdout), &rows); err != nil || len(rows) != 2 || rows[0].ID != secondID || rows[0].Folder != second {
		t.Errorf("mst report %s --json = %s, %v; want 2 rows, %s first", listing, lsj.stdout, err, secondID)
	}
	if r := runCLI(t, "show", listing, variant, caseID); r.code != 2 || !strings.Contains(r.stderr, "eval's runs") {
		t.Errorf("mst show %s = exit %d %q, want 2: an eval's runs, not a run", listing, r.code, r.stderr)
	}

	// One id at two places: refused, naming both.
	dup := filepath.Join("mst-results", newID)
	if err := os.CopyFS(dup, os.DirFS(newDir)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"report", newID}, {"show", newID, variant, caseID}, {"grade", newID}, {"compare", newID, oldDir}, {"view", newID}, {"run", "--resume", newID}} {
		r := runCLI(t, args...)
		if r.code == 0 || !strings.Contains(r.stderr, newDir) || !strings.Contains(r.stderr, dup) {
			t.Errorf("mst %v with the id at two places = exit %d %q, want an error naming %s and %s", args, r.code, r.stderr, newDir, dup)
		}
	}
}
