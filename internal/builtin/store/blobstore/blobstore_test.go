package blobstore_test

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/store/storetest"
	"github.com/mst-eval/mst/transcript"
)

// TestGCS runs the conformance suite against fake-gcs-server.
func TestGCS(t *testing.T) {
	t.Parallel()
	e := startGCS(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		b, name := e.newBucket(t)
		return blobstore.New(b, &url.URL{Scheme: "gs", Host: name, Path: "/results/team"}, blobstore.Options{Eval: "weather"})
	})
}

// TestS3 runs the conformance suite against gofakes3, through the same
// URL opener users get.
func TestS3(t *testing.T) {
	t.Parallel()
	e := startS3(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := blobstore.Open(t.Context(), e.newBucket(t, "mst"), blobstore.Options{Eval: "weather"})
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		return s
	})
}

// objects lists every object of a bucket with its content.
func objects(t *testing.T, b *blob.Bucket) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	it := b.List(nil)
	for {
		o, err := it.Next(t.Context())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.ReadAll(t.Context(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = data
	}
}

// TestNoSecretInBucket plants the secret in everything a run stores: no
// object's name or content holds it.
func TestNoSecretInBucket(t *testing.T) {
	t.Parallel()
	e := startGCS(t)
	b, name := e.newBucket(t)
	s := blobstore.New(b, &url.URL{Scheme: "gs", Host: name}, blobstore.Options{Eval: "weather"})
	r, err := s.Create(t.Context(), "secret-run", storetest.Redactor(t))
	if err != nil {
		t.Fatal(err)
	}
	storetest.WriteSecrets(t, r)
	all := objects(t, b)
	for key, data := range all {
		storetest.CheckNoSecret(t, "object name "+key, []byte(key))
		storetest.CheckNoSecret(t, key, data)
	}
	if len(all) < 6 {
		t.Errorf("the run stored %d objects, want its records, transcripts and grades", len(all))
	}
}

// TestLayout: a run's objects are PREFIX/EVAL/runs/ID/ and then the names
// the directory store gives its files, but for the grades and the lock,
// which an object store keeps its own way.
func TestLayout(t *testing.T) {
	t.Parallel()
	e := startGCS(t)
	b, name := e.newBucket(t)
	s := blobstore.New(b, &url.URL{Scheme: "gs", Host: name, Path: "/team/mst/"}, blobstore.Options{Eval: "Weather Q1"})
	dir := store.Dir{Root: t.TempDir(), Eval: "Weather Q1"}
	ctx := t.Context()
	var keys []transcript.Key
	for _, c := range []string{"plain", "Odd Case/1", strings.Repeat("long", 80)} {
		keys = append(keys, transcript.Key{Case: c, Variant: "terse", Trial: 2})
	}
	fill := func(st store.Store) store.Run {
		r, err := st.Create(ctx, "weather-20261201-093000-a1b2c3", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WriteRun(ctx, transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: r.ID(), Eval: "Weather Q1"}); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteConfig(ctx, "my-eval.yml", []byte("name: x\n")); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteCases(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteGraders(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if _, err := r.WriteTranscript(ctx, &transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Key: k}); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	fill(dir)
	r := fill(s)
	runKey := "team/mst/" + store.SafeName("Weather Q1") + "/runs/weather-20261201-093000-a1b2c3/"
	if want := (&url.URL{Scheme: "gs", Host: name, Path: "/" + runKey}).String(); r.Location() != want {
		t.Errorf("Location = %q, want %q", r.Location(), want)
	}
	// Both stores put the run at EVAL/runs/ID under their root, with the
	// same EVAL for the same name, and name what is in it alike.
	var inBucket []string
	for key := range objects(t, b) {
		if !strings.HasPrefix(key, runKey) {
			t.Errorf("object %s is outside the run's prefix %s", key, runKey)
			continue
		}
		if rel := strings.TrimPrefix(key, "team/mst/"); path.Base(rel) != "run.created" {
			inBucket = append(inBucket, rel)
		}
	}
	var onDisk []string
	root := dir.Root
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			onDisk = append(onDisk, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(inBucket)
	slices.Sort(onDisk)
	if diff := cmp.Diff(onDisk, inBucket); diff != "" {
		t.Errorf("names in the bucket differ from the directory store's (-folder +bucket):\n%s", diff)
	}
}

// TestLeaseEnds: a writer that holds a run and dies without letting go
// (its lease is no longer renewed) holds it only until its lease ends;
// then the run reads interrupted and another writer takes it, and the
// dead writer's lease is never taken twice.
func TestLeaseEnds(t *testing.T) {
	t.Parallel()
	e := startGCS(t)
	b, name := e.newBucket(t)
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// A lease of an hour is not renewed during the test (renewals come
	// every third of it, by the real clock): the writer is as good as
	// dead once the test's clock moves past it.
	s := blobstore.New(b, &url.URL{Scheme: "gs", Host: name}, blobstore.Options{Eval: "e", Lease: time.Hour, Now: clock})
	ctx := t.Context()
	r, err := s.Create(ctx, "run", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteRun(ctx, transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "run", Collect: transcript.CollectRunning}); err != nil {
		t.Fatal(err)
	}
	dead := transcript.Owner{PID: 4242, Host: "laptop", Started: now}
	if _, err := r.Lock(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lock(ctx, transcript.Owner{PID: 1, Host: "ci"}); !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "laptop") {
		t.Errorf("Lock of a run within its holder's lease = %v, want ErrBusy naming the holder", err)
	}
	mu.Lock()
	now = now.Add(time.Hour + time.Second)
	mu.Unlock()
	if o, live, err := r.Holder(ctx); err != nil || live || o.PID != 4242 {
		t.Errorf("Holder after the lease ended = %+v live %v, %v; want the dead writer, not live", o, live, err)
	}
	if rec, err := r.ReadRun(ctx); err != nil || rec.Collect != transcript.CollectInterrupted || !strings.Contains(rec.Note, "laptop") {
		t.Errorf("ReadRun after the lease ended = %q %q, %v; want interrupted, naming the writer", rec.Collect, rec.Note, err)
	}
	// Many take it over at once: one wins.
	var wg sync.WaitGroup
	var won atomic32
	for i := range 8 {
		wg.Go(func() {
			o, err := s.Open(ctx, "run", nil)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := o.Lock(ctx, transcript.Owner{PID: 100 + i, Host: "ci"}); err == nil {
				won.add()
			} else if !errors.Is(err, store.ErrBusy) {
				t.Errorf("Lock = %v, want nil or ErrBusy", err)
			}
		})
	}
	wg.Wait()
	if won.n != 1 {
		t.Errorf("%d writers took over the ended lease, want one", won.n)
	}
}

type atomic32 struct {
	mu sync.Mutex
	n  int
}

func (a *atomic32) add() { a.mu.Lock(); a.n++; a.mu.Unlock() }

// TestListRuns lists an eval's runs newest first, and only that eval's.
func TestListRuns(t *testing.T) {
	t.Parallel()
	e := startS3(t)
	u := e.newBucket(t, "p")
	ctx := t.Context()
	s, err := blobstore.Open(ctx, u, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i, id := range []string{"w-b", "w-a", "w-c"} {
		r, err := s.WithEval("weather").Create(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.WriteRun(ctx, transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: id, Started: day.Add(time.Duration(i) * time.Hour), Collect: transcript.CollectComplete})
	}
	other, _ := s.WithEval("maps").Create(ctx, "m-1", nil)
	other.WriteRun(ctx, transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "m-1", Started: day.Add(9 * time.Hour)})
	// A run being created, with no record yet, is not listed.
	s.WithEval("weather").Create(ctx, "w-new", nil)

	list, err := s.ListRuns(ctx, "p/weather/runs/")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r.ID)
		if !strings.HasPrefix(r.Location, "s3://"+u.Host+"/p/weather/runs/"+r.ID+"/") {
			t.Errorf("listed %s at %s", r.ID, r.Location)
		}
	}
	if diff := cmp.Diff([]string{"w-c", "w-a", "w-b"}, ids); diff != "" {
		t.Errorf("ListRuns (-want +got):\n%s", diff)
	}
	// Open without an eval finds a run under any.
	if r, err := s.Open(ctx, "m-1", nil); err != nil || !strings.Contains(r.Location(), "/maps/runs/m-1/") {
		t.Errorf("Open(m-1) with no eval = %v, %v", r, err)
	}
}

// TestParse refuses every URL MST cannot use, saying why, and keeps the
// ones it can.
func TestParse(t *testing.T) {
	t.Parallel()
	good := []string{"gs://bkt", "gs://bkt/", "gs://bkt/p/q", "s3://bkt/p", "s3://bkt?region=eu-west-1", "s3://bkt/p?endpoint=http://127.0.0.1:9000&use_path_style=true&disable_https=true"}
	for _, raw := range good {
		if _, err := blobstore.Parse(raw); err != nil {
			t.Errorf("Parse(%q) = %v, want nil", raw, err)
		}
	}
	bad := map[string]string{
		"azblob://c/p":            "cannot keep results at a azblob: URL",
		"http://example.com/x":    "cannot keep results at a http: URL",
		"gs:/b":                   "name the bucket",
		"gs:b":                    "name the bucket",
		"gs:///p":                 "name the bucket",
		"s3://AKIA:secret@b/p":    "carries no credentials",
		"gs://bkt/p?access_id=x":  "takes no query parameters",
		"s3://bkt/p?aws_secret=x": `"aws_secret" is not one`,
		"s3://bkt/p#x":            "no #fragment",
		"gs://bkt/../p":           "no . or ..",
		"s3://bkt/p/./q":          "no . or ..",
		"s3://bkt/%zz":            "not a URL",
	}
	for raw, want := range bad {
		_, err := blobstore.Parse(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") && strings.Contains(raw, "secret@") {
			t.Errorf("Parse(%q) repeats the credentials: %v", raw, err)
		}
	}
}

// TestBucketNames: a bucket name each service would refuse is refused
// when the URL is parsed, saying what is wrong and what is allowed.
func TestBucketNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63)
	good := []string{
		"gs://abc", "gs://" + long, "gs://my_bucket-1", "gs://a.b.c", "gs://" + long + "." + long + "." + long,
		"s3://abc", "s3://" + long, "s3://my-bucket.example", "s3://amzn-bucket", "s3://evals-111122223333-us-west-2-an",
	}
	for _, raw := range good {
		if _, err := blobstore.Parse(raw + "/p"); err != nil {
			t.Errorf("Parse(%q) = %v, want nil", raw, err)
		}
	}
	bad := map[string]string{
		"gs://ab":              "is 2 characters long",
		"gs://" + long + "a":   "is 64 characters long",
		"gs://" + long + "a.b": "is 64 characters long",
		"gs://" + strings.Repeat(long+".", 4) + "a": "is 257 characters long",
		"gs://My-Bucket":              `upper-case letter 'M'`,
		"gs://my+bucket":              `the character '+'`,
		"gs://-bucket":                "start and end with a letter or a digit",
		"gs://bucket_":                "start and end with a letter or a digit",
		"gs://192.168.5.4":            "IP address",
		"gs://goog-results":           `starts with "goog"`,
		"gs://my-google-runs":         `"google"`,
		"gs://my-g00gle-runs":         `"google"`,
		"s3://ab":                     "is 2 characters long",
		"s3://" + long + "a":          "is 64 characters long",
		"s3://my_bucket":              `the character '_'`,
		"s3://a..b":                   "two dots in a row",
		"s3://10.0.0.1":               "IP address",
		"s3://xn--bucket":             `starts with "xn--"`,
		"s3://sthree-bucket":          `starts with "sthree-"`,
		"s3://amzn-s3-demo-bucket":    `starts with "amzn-s3-demo-"`,
		"s3://bucket-s3alias":         `ends with "-s3alias"`,
		"s3://bucket--ol-s3":          `ends with "--ol-s3"`,
		"s3://bucket.mrap":            `ends with ".mrap"`,
		"s3://bucket--usw2-az1--x-s3": `ends with "--x-s3"`,
		"s3://bucket--table-s3":       `ends with "--table-s3"`,
	}
	for raw, want := range bad {
		_, err := blobstore.Parse(raw + "/p")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", raw, err, want)
			continue
		}
		rule := "a GCS bucket name is"
		if strings.HasPrefix(raw, "s3") {
			rule = "an S3 bucket name is"
		}
		if !strings.Contains(err.Error(), rule) {
			t.Errorf("Parse(%q) = %v, want it to say what is allowed (%q)", raw, err, rule)
		}
	}
}

// TestOpenGCSURL opens gs://BUCKET/PREFIX as a user does, the emulator
// named by STORAGE_EMULATOR_HOST, and a bucket that is not there fails at
// once.
func TestOpenGCSURL(t *testing.T) {
	e := startGCS(t)
	_, name := e.newBucket(t)
	t.Setenv("STORAGE_EMULATOR_HOST", e.host)
	ctx := t.Context()
	u, err := blobstore.Parse("gs://" + name + "/mst")
	if err != nil {
		t.Fatal(err)
	}
	s, err := blobstore.Open(ctx, u, blobstore.Options{Eval: "weather"})
	if err != nil {
		t.Fatalf("Open(%s) = %v", u, err)
	}
	r, err := s.Create(ctx, "run-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	k := transcript.Key{Case: "c", Variant: "v", Trial: 1}
	if _, err := r.WriteTranscript(ctx, &transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Key: k, Answer: "sunny"}); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadTranscript(ctx, k); err != nil || got.Answer != "sunny" {
		t.Errorf("ReadTranscript = %v, %v", got, err)
	}
	missing, _ := blobstore.Parse("gs://no-such-bucket/mst")
	if _, err := blobstore.Open(ctx, missing, blobstore.Options{}); err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("Open of a bucket that is not there = %v, want an error naming it", err)
	}
}

// TestOpenS3Missing: an S3 bucket that is not there fails at Open.
func TestOpenS3Missing(t *testing.T) {
	t.Parallel()
	e := startS3(t)
	u, err := blobstore.Parse(e.storeURL("no-such-bucket", "p", true))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := blobstore.Open(ctx, u, blobstore.Options{}); err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("Open of a bucket that is not there = %v, want an error naming it", err)
	}
}
