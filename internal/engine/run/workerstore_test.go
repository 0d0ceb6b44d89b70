//go:build linux

package run_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/transcript"
)

// workerStoreEval is four cases under two variants that the offline model
// answers with the test server's echo tool.
var workerStoreFiles = map[string]string{
	"eval.yaml": `
name: workerstore
datasets: [cases.jsonl]
servers:
  test: {command: SERVER}
variants:
  v: {model: offline}
  w: {model: offline}
graders:
  - toolCalled: echo
`,
	"cases.jsonl": `{"id": "a", "input": "Please echo 'a'"}
{"id": "b", "input": "Please echo 'b'"}
{"id": "über-🦉", "input": "Please echo 'c'"}
{"id": "d", "input": "Please echo 'd'"}
`,
}

// openStore opens the store at loc as mst run does.
func openStore(t *testing.T, loc string) *blobstore.Store {
	t.Helper()
	u, err := blobstore.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := blobstore.Open(t.Context(), u, blobstore.Options{Eval: "workerstore"})
	if err != nil {
		t.Fatalf("opening %s: %v", loc, err)
	}
	return s
}

// objects lists the names under prefix in b.
func objects(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			break
		}
		out = append(out, o.Key)
	}
	return out
}

// TestWorkersWriteToBucket runs an eval on two processes workers with the
// run in a gs:// bucket and in an s3:// bucket (emulators, found through
// each cloud's own chain: STORAGE_EMULATOR_HOST, an AWS profile in files):
// every transcript is in the bucket, written by the workers themselves
// (their shard folders, kept, hold none, so nothing was copied back), and
// the run is whole and graded.
func TestWorkersWriteToBucket(t *testing.T) {
	for _, kind := range []string{"gs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			var loc string
			var bucket *blob.Bucket
			switch kind {
			case "gs":
				g := blobtest.StartGCS(t)
				name := g.NewBucket(t)
				blobtest.Setenv(t, g.Env())
				loc, bucket = "gs://"+name+"/team", g.OpenBucket(t, name)
			case "s3":
				s := blobtest.StartS3(t)
				name := s.NewBucket(t)
				blobtest.Setenv(t, s.Env(t))
				loc, bucket = s.StoreURL(name, "team"), s.OpenBucket(t, name)
			}
			p, err := run.NewPlan(t.Context(), request(writeEval(t, workerStoreFiles)))
			if err != nil {
				t.Fatal(err)
			}
			shards := t.TempDir()
			o := options(openStore(t, loc))
			o.Runner = runner.ProcessesDefinition()
			o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": shards}, Shards: 2, Keep: runner.KeepAlways}
			out, err := run.Execute(t.Context(), p, o)
			if err != nil {
				t.Fatalf("Execute = %v", err)
			}
			if out.Run.Collect != transcript.CollectComplete || out.Run.Counts.Answered != 8 {
				t.Fatalf("run %s with counts %+v (%s), want 8 answered", out.Run.Collect, out.Run.Counts, out.Run.Note)
			}
			if len(out.Run.Runner.Machines) != 2 {
				t.Errorf("run.json records %d machines, want 2", len(out.Run.Runner.Machines))
			}
			prefix := "team/workerstore/runs/" + out.Run.ID + "/transcripts/"
			if got := objects(t, bucket, prefix); len(got) != 8 {
				t.Errorf("the bucket holds %d transcripts under %s, want 8: %v", len(got), prefix, got)
			}
			var local []string
			filepath.WalkDir(shards, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.Contains(filepath.ToSlash(path), "/transcripts/") {
					local = append(local, path)
				}
				return err
			})
			if len(local) > 0 {
				t.Errorf("the workers wrote transcripts into their shard folders, to be copied back: %v", local)
			}
			for _, v := range out.Report.Variants {
				if v.Graded != 4 || v.Passed != 4 {
					t.Errorf("variant %s: %d graded, %d passed, want 4 and 4", v.Variant, v.Graded, v.Passed)
				}
			}
		})
	}
}

// TestWorkerStoreRefused: the coordinator may write the run's bucket, but
// the identity of the workers' machine may not write transcripts there.
// Each shard fails at its start, before any server starts or any prompt
// is sent, with an error that names the bucket and the identity; no trial
// runs and no transcript is stored.
func TestWorkerStoreRefused(t *testing.T) {
	s := blobtest.StartS3(t)
	name := s.NewBucket(t)
	blobtest.Setenv(t, s.Env(t))
	// Only the workers write transcripts and their test objects.
	refusing := blobtest.RefuseWrites(t, s.StoreURL(name, "team"), func(r *http.Request) bool {
		path, _ := url.PathUnescape(r.URL.Path)
		return blobtest.Writes(r) && (strings.Contains(path, "/probes/") || strings.Contains(path, "/transcripts/"))
	})
	p, err := run.NewPlan(t.Context(), request(writeEval(t, workerStoreFiles)))
	if err != nil {
		t.Fatal(err)
	}
	o := options(openStore(t, refusing))
	o.Runner = runner.ProcessesDefinition()
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: 2, Keep: runner.KeepNever}
	out, err := run.Execute(t.Context(), p, o)
	if err == nil {
		t.Fatalf("Execute = nil error, run %s %+v; want the shards' refusal", out.Run.Collect, out.Run.Counts)
	}
	for _, want := range []string{"cannot write transcripts into the run's store, so no trial ran", "s3://" + name, "the AWS profile default", "s3:PutObject"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Execute = %v\nwant it to say %q", err, want)
		}
	}
	if got := objects(t, s.OpenBucket(t, name), "team/workerstore/runs/"); len(got) == 0 {
		t.Fatal("the coordinator stored nothing: the refusal was not the workers' alone")
	} else {
		for _, o := range got {
			if strings.Contains(o, "/transcripts/") {
				t.Errorf("a transcript was stored: %s", o)
			}
		}
	}
}

// outage is a reverse proxy in front of an S3 emulator that, while down is
// set, answers every write of a transcript with 503 Service Unavailable
// (what S3 sends when it cannot serve), and counts the transcripts it let
// through; it goes down by itself once after stored transcripts are in.
type outage struct {
	after  int64
	stored atomic.Int64
	down   atomic.Bool
}

func (o *outage) start(t *testing.T, target string) string {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, _ := url.PathUnescape(r.URL.Path)
		transcriptWrite := r.Method == http.MethodPut && strings.Contains(path, "/transcripts/")
		if transcriptWrite && o.down.Load() {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>Service is unable to handle request.</Message></Error>`)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		proxy.ServeHTTP(rec, r)
		if transcriptWrite && rec.status < 300 && o.stored.Add(1) >= o.after {
			o.down.Store(true)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// TestStoreOutage: the bucket stops taking transcripts mid-run (503, after
// the store's retries, bounded to 2 s a write here). The trials whose transcript could not be written
// are missing, the run ends partial, and the transcripts stored before the
// outage are kept as they were; once the bucket is back, a resume runs
// only the missing trials and the run is complete.
func TestStoreOutage(t *testing.T) {
	s := blobtest.StartS3(t)
	name := s.NewBucket(t)
	blobtest.Setenv(t, s.Env(t))
	t.Setenv("MST_STORE_CALL", "2s") // cli.CallEnv, which the workers get
	out := &outage{after: 3}
	u, _ := url.Parse(s.StoreURL(name, "team"))
	q := u.Query()
	q.Set("endpoint", out.start(t, q.Get("endpoint")))
	u.RawQuery = q.Encode()
	loc := u.String()

	p, err := run.NewPlan(t.Context(), request(writeEval(t, workerStoreFiles)))
	if err != nil {
		t.Fatal(err)
	}
	o := options(openStore(t, loc))
	o.Runner = runner.ProcessesDefinition()
	o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": t.TempDir()}, Shards: 2, Keep: runner.KeepNever}
	first, err := run.Execute(t.Context(), p, o)
	if err != nil {
		t.Fatalf("Execute during the outage = %v; want a partial run", err)
	}
	bucket := s.OpenBucket(t, name)
	prefix := "team/workerstore/runs/" + first.Run.ID + "/transcripts/"
	kept := map[string]string{}
	for _, k := range objects(t, bucket, prefix) {
		b, _ := bucket.ReadAll(t.Context(), k)
		kept[k] = string(b)
	}
	// Writes already on their way when the outage began may land.
	c := first.Run.Counts
	if first.Run.Collect != transcript.CollectPartial || len(kept) < 3 || len(kept) == 8 || c.Answered != len(kept) || c.Missing != 8-len(kept) {
		t.Fatalf("the run during the outage is %s with %+v and %d transcripts stored; want partial, the stored ones answered (at least 3, not all) and the rest missing", first.Run.Collect, c, len(kept))
	}

	out.after = 1 << 30
	out.down.Store(false)
	st, err := openStore(t, loc).Open(t.Context(), first.Run.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := request(writeEval(t, workerStoreFiles))
	req.Resume = st
	rp, err := run.NewPlan(t.Context(), req)
	if err != nil {
		t.Fatalf("NewPlan(--resume) = %v", err)
	}
	if len(rp.Resume.Todo) != 8-len(kept) {
		t.Errorf("the resume plans %d trials, want the %d missing", len(rp.Resume.Todo), 8-len(kept))
	}
	res, err := run.Execute(t.Context(), rp, o)
	if err != nil {
		t.Fatalf("Execute(--resume) = %v", err)
	}
	if res.Run.Collect != transcript.CollectComplete || res.Run.Counts.Answered != 8 {
		t.Fatalf("the resumed run is %s with %+v, want complete with 8 answered", res.Run.Collect, res.Run.Counts)
	}
	for k, before := range kept {
		if b, _ := bucket.ReadAll(t.Context(), k); string(b) != before {
			t.Errorf("%s changed in the resume", k)
		}
	}
}
