package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/testkit/testserver"
)

// TestReadRunWhileWritten reads a run from its bucket while mst run is
// still writing it, on each emulator: three quick trials are stored and a
// fourth is in flight (the test server's sleep tool has left its mark and
// waits for the wake file). mst report on the run's URL shows it running,
// with the three trials and one missing, and no error; mst report on the
// eval's runs lists it as running. Then the last trial is let go, the run
// ends, and both show it complete.
func TestReadRunWhileWritten(t *testing.T) {
	t.Run("gs", func(t *testing.T) {
		g := blobtest.StartGCS(t)
		bucket := g.NewBucket(t)
		blobtest.Setenv(t, g.Env())
		readLive(t, "gs://"+bucket+"/team", g.OpenBucket(t, bucket))
	})
	t.Run("s3", func(t *testing.T) {
		s := blobtest.StartS3(t)
		bucket := s.NewBucket(t)
		// The AWS chain as a user has it: a profile, no key variables.
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		blobtest.Setenv(t, s.Env(t))
		readLive(t, s.StoreURL(bucket, "team"), s.OpenBucket(t, bucket))
	})
}

// liveReport is the part of mst report --json this test reads.
type liveReport struct {
	Run struct {
		ID      string `json:"id"`
		Collect string `json:"collect"`
		Note    string `json:"note"`
	} `json:"run"`
	Counts struct {
		Planned  int `json:"planned"`
		Answered int `json:"answered"`
		Missing  int `json:"missing"`
	} `json:"counts"`
	CompleteCases int `json:"completeCases"`
}

func readLive(t *testing.T, results string, bkt *blob.Bucket) {
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	os.Mkdir(marks, 0o755)
	server := testServerCommand(t, dir)
	evalFile := filepath.Join(dir, "eval.yaml")
	os.WriteFile(evalFile, []byte(`name: live
datasets: [cases.jsonl]
servers:
  test:
    command: `+server+`
    args: [--mark, "`+marks+`"]
variants:
  v: {model: offline}
trials: 1
limits: {concurrency: 4}
`), 0o644)
	// Every trial starts at once; the slow one waits for the wake file.
	os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(`{"id": "a", "input": "Please echo 'one' back to me"}
{"id": "b", "input": "Please echo 'two' back to me"}
{"id": "c", "input": "Please echo 'three' back to me"}
{"id": "slow", "input": "sleep for 600 seconds please"}
`), 0o644)

	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	var woken bool
	wake := func() {
		if !woken {
			woken = true
			os.WriteFile(filepath.Join(marks, testserver.WakeFile), nil, 0o600)
		}
	}
	// However the test ends, the slow trial is let go and the run waited
	// for, so nothing of it outlives the test.
	defer func() {
		wake()
		if done != nil {
			<-done
		}
	}()
	go func() {
		var stdout, stderr bytes.Buffer
		code := cli.Main(t.Context(), []string{"run", evalFile, "--results", results, "--json"},
			cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ()})
		done <- result{code, stderr.String()}
	}()

	// The event: the slow trial's call is in flight, and the three quick
	// trials' transcripts are in the bucket.
	var runPrefix string
	waitFor(t, done, "the sleep call's mark in "+marks, func() bool {
		ents, _ := os.ReadDir(marks)
		return len(ents) > 0
	})
	waitFor(t, done, "three transcripts in the bucket", func() bool {
		keys := listKeys(t, bkt, "team/live/runs/")
		var n int
		for _, k := range keys {
			if i := strings.Index(k, "/transcripts/"); i >= 0 {
				n++
				runPrefix = k[:i+1]
			}
		}
		return n >= 3
	})
	runID := filepath.Base(strings.TrimSuffix(runPrefix, "/"))
	runURL, runsURL := keyURL(t, results, runPrefix), keyURL(t, results, "team/live/runs/")

	check := func(when, collect string, answered, missing int) {
		t.Helper()
		rep := runCLI(t, "report", runURL, "--json")
		if rep.code != 0 {
			t.Fatalf("%s: mst report %s --json exited %d\n%s", when, runURL, rep.code, rep.stderr)
		}
		var r liveReport
		if err := json.Unmarshal([]byte(rep.stdout), &r); err != nil {
			t.Fatalf("%s: mst report %s --json printed no report (%v):\n%s", when, runURL, err, rep.stdout)
		}
		if r.Run.ID != runID || r.Run.Collect != collect || r.Counts.Planned != 4 || r.Counts.Answered != answered || r.Counts.Missing != missing {
			t.Errorf("%s: mst report %s = run %s %s, counts %+v; want run %s %s, 4 planned, %d answered, %d missing",
				when, runURL, r.Run.ID, r.Run.Collect, r.Counts, runID, collect, answered, missing)
		}
		if strings.Contains(r.Run.Note, "interrupted") || strings.Contains(strings.ToLower(rep.stderr), "error") {
			t.Errorf("%s: mst report %s says something is wrong: note %q, stderr:\n%s", when, runURL, r.Run.Note, rep.stderr)
		}
		ls := runCLI(t, "report", runsURL)
		if ls.code != 0 {
			t.Fatalf("%s: mst report %s exited %d\n%s", when, runsURL, ls.code, ls.stderr)
		}
		lines := strings.Split(strings.TrimSpace(ls.stdout), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "RUN") || !strings.HasPrefix(lines[1], runID+" ") || !strings.Contains(lines[1], " "+collect+" ") {
			t.Errorf("%s: mst report %s =\n%s\nwant a header and run %s, %s", when, runsURL, ls.stdout, runID, collect)
		}
	}
	check("while the last trial is in flight", "running", 3, 1)

	wake()
	r := <-done
	done = nil
	if r.code != 0 {
		t.Fatalf("mst run --results %s exited %d\n%s", results, r.code, r.stderr)
	}
	check("after the run", "complete", 4, 0)
}

// keyURL is the URL of a key of the bucket of a store URL, keeping its
// query (an s3:// endpoint).
func keyURL(t *testing.T, store, key string) string {
	t.Helper()
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + key
	return u.String()
}

// listKeys lists the keys of the bucket under prefix.
func listKeys(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(t.Context())
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatalf("listing %s: %v", prefix, err)
		}
		keys = append(keys, o.Key)
	}
}

// waitFor waits until cond holds, looking again every 20 ms; the run
// ending first fails the test.
func waitFor[R any](t *testing.T, done chan R, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case r := <-done:
			done <- r // for the deferred wait
			t.Fatalf("mst run ended before %s: %+v", what, r)
		case <-tick.C:
		}
	}
}
