package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/internal/cli"
)

// The fault matrix at the level of mst run: the quickstart (84 trials on
// the offline model) keeps its run in a bucket of an emulator behind a
// blobtest.FaultProxy, and the proxy switches to a fault at a moment of
// the run. mst run must end within a bound of the fault, never with exit
// code 0 when trials were lost, saying the store is not answering and how
// to resume; once the store answers again the resume runs exactly the
// missing trials and exits 0.
//
// Each store call (a write, read, listing, lease renewal) meeting each
// fault on each cloud, with its retries, bounds and reports, is covered by
// internal/builtin/store/blobstore's TestFaults (refuse, hang, 500, 503, cut, trickle ×
// open, write, read, list, renew × gs, s3), releasing a lock under a hang
// by TestFaultReleaseBounded, cancelling by TestFaultCancel, and a cut
// write that landed by TestFaultOnlyMatched. This matrix adds what only a
// whole run shows: the run goes on, ends, and is resumed, for every fault
// at every moment (mid-run, a lease renewal, the end; TestStoreFaultAtStart
// the start), each on one of the two clouds.

// storeFaultBound is how long mst run may take from the fault to its end,
// with MST_STORE_CALL=2s.
const storeFaultBound = 30 * time.Second

// quickstartTrials is the quickstart's trials: 14 cases × 2 variants × 3.
const quickstartTrials = 84

// The moments of a run at which the store fails.
const (
	midRun = "mid-run" // after some transcripts were written
	early  = "early"   // after a few transcripts: most trials are still to run
	atEnd  = "end"     // after every transcript was written: the final gather and report
	renew  = "renewal" // a renewal of the run's lease
)

// decodedURI is r's path and query, unescaped: the object's name in it
// reads as written (GCS names the object in its query on an upload).
func decodedURI(r *http.Request) string {
	s, err := url.QueryUnescape(r.URL.RequestURI())
	if err != nil {
		return r.URL.RequestURI()
	}
	return s
}

func isTranscriptWrite(r *http.Request) bool {
	return (r.Method == http.MethodPut || r.Method == http.MethodPost) && strings.Contains(decodedURI(r), "/transcripts/")
}

func isLockCall(r *http.Request) bool { return strings.Contains(decodedURI(r), "/locks/") }

// watcher counts the transcript writes a FaultProxy sees (as the match
// of its Pass), and closes a channel at the nth.
type watcher struct {
	writes  atomic.Int64
	n       int64
	nth     chan struct{}
	nthOnce sync.Once
}

func newWatcher(n int) *watcher {
	return &watcher{n: int64(n), nth: make(chan struct{})}
}

// match sees each request; it picks none (under Pass nothing is faulted).
func (w *watcher) match(r *http.Request) bool {
	if isTranscriptWrite(r) && w.writes.Add(1) == w.n {
		w.nthOnce.Do(func() { close(w.nth) })
	}
	return false
}

// faultStore is a bucket of an emulator behind a FaultProxy.
type faultStore struct {
	proxy   *blobtest.FaultProxy
	results string // --results
	bucket  *blob.Bucket
	prefix  string // the store's prefix in the bucket
}

func startFaultStore(t *testing.T, kind string) *faultStore {
	t.Helper()
	switch kind {
	case "gs":
		g := blobtest.StartGCS(t)
		name := g.NewBucket(t)
		p, host := blobtest.StartFaultProxy(t, g.Host())
		t.Setenv("STORAGE_EMULATOR_HOST", host)
		return &faultStore{proxy: p, results: "gs://" + name + "/team", bucket: g.OpenBucket(t, name), prefix: "team/"}
	default:
		s := blobtest.StartS3(t)
		name := s.NewBucket(t)
		blobtest.Setenv(t, s.Env(t))
		p, loc := blobtest.StartFaultProxy(t, s.StoreURL(name, "team"))
		return &faultStore{proxy: p, results: loc, bucket: s.OpenBucket(t, name), prefix: "team/"}
	}
}

// transcripts counts the run's transcripts in the bucket, read past the
// proxy.
func (s *faultStore) transcripts(t *testing.T, id string) int {
	t.Helper()
	n := 0
	it := s.bucket.List(&blob.ListOptions{Prefix: s.prefix + "quickstart/runs/" + id + "/transcripts/"})
	for {
		o, err := it.Next(t.Context())
		if err != nil {
			break
		}
		if strings.HasSuffix(o.Key, ".json") {
			n++
		}
	}
	return n
}

// faultedRun is mst run going on in this process.
type faultedRun struct {
	done           chan struct{}
	code           int
	stdout, stderr bytes.Buffer
}

func startFaulted(ctx context.Context, args ...string) *faultedRun {
	r := &faultedRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.code = cli.Main(ctx, args, cli.Stdio{Out: &r.stdout, Err: &r.stderr, Env: os.Environ()})
	}()
	return r
}

var (
	resultsLine = regexp.MustCompile(`(?m)^results: (\S+/quickstart/runs/(quickstart-[^/\s]+)/\S*)$`)
	startLine   = regexp.MustCompile(`(?m)^run \S+: (\d+) trials`)
)

func TestStoreFaultMatrix(t *testing.T) {
	// Not parallel: it sets MST_STORE_CALL, MST_STORE_LEASE and the
	// clouds' variables.
	rows := []struct {
		fault  blobtest.Fault
		moment string
		kind   string
		// writesOnly limits the fault to transcript writes: the
		// coordinator can still read the run at the end.
		writesOnly bool
		// exit is the code mst run ends with: 3 when it could read
		// the run back at the end and found it partial, 1 when the
		// store failed the coordinator's own reads at the end (it
		// then prints the run's URL and the resume command), 0 when
		// no trial was lost.
		exit int
		// lost says trials are missing after the run: a fault that
		// forwards the write (cut, trickle) lets it land.
		lost bool
		// outage is MST_STORE_OUTAGE for the row: how long the run goes
		// on while its store keeps nothing ("": the default, 2m).
		outage string
	}{
		// Early in the run, with most trials still to run: the run
		// stops once its store has kept nothing for MST_STORE_OUTAGE,
		// instead of running every trial left to lose it.
		{fault: blobtest.Refuse, moment: early, kind: "gs", exit: 1, lost: true, outage: "3s"},
		{fault: blobtest.Refuse, moment: midRun, kind: "gs", exit: 1, lost: true},
		{fault: blobtest.Hang, moment: midRun, kind: "s3", exit: 1, lost: true},
		{fault: blobtest.Status(503), moment: midRun, kind: "gs", writesOnly: true, exit: 3, lost: true},
		{fault: blobtest.Cut, moment: atEnd, kind: "gs", exit: 1},
		{fault: blobtest.Trickle, moment: midRun, kind: "s3", exit: 1},
		// Every answer cut from mid-run on: writes land, but none can
		// be read back to be sure, nor the run at the end.
		{fault: blobtest.Cut, moment: midRun, kind: "s3", exit: 1},
		{fault: blobtest.Refuse, moment: atEnd, kind: "s3", exit: 1},
		{fault: blobtest.Hang, moment: atEnd, kind: "gs", exit: 1},
		{fault: blobtest.Status(503), moment: atEnd, kind: "s3", exit: 1},
		{fault: blobtest.Trickle, moment: atEnd, kind: "gs", exit: 1},
		{fault: blobtest.Hang, moment: renew, kind: "gs", exit: 0},
		{fault: blobtest.Status(503), moment: renew, kind: "s3", exit: 0},
		{fault: blobtest.Cut, moment: renew, kind: "gs", exit: 0},
		{fault: blobtest.Trickle, moment: renew, kind: "s3", exit: 0},
		// (Refusing is a fault of the whole store, never of one call:
		// refused at a renewal is refused mid-run.)
	}
	t.Setenv(cli.CallEnv, "2s")
	t.Setenv(cli.LeaseEnv, "1500ms") // renewed every 500ms
	for _, row := range rows {
		name := strings.ReplaceAll(row.fault.String(), " ", "") + "/" + row.moment + "/" + row.kind
		t.Run(name, func(t *testing.T) {
			s := startFaultStore(t, row.kind)
			s.proxy.TrickleEvery = 20 * time.Millisecond
			evalFile := quickstartCopy(t)
			t.Chdir(t.TempDir())
			// The fault comes after 70 transcripts mid-run, after all
			// of them at the end; a renewal fault at the first lock
			// call after the 10th transcript. A run goes on through
			// every trial left while its store does not answer, each
			// write failing after MST_STORE_CALL, so the time from a
			// mid-run fault to the end grows with the trials left
			// (about left × 2s / 4 at the quickstart's concurrency
			// of 4): 14 left keep it well within storeFaultBound.
			n := 70
			if row.moment == renew || row.moment == early {
				n = 10
			}
			if row.outage != "" {
				t.Setenv(cli.OutageEnv, row.outage)
			}
			if row.moment == atEnd {
				n = quickstartTrials
			}
			w := newWatcher(n)
			s.proxy.Set(blobtest.Pass, w.match)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := startFaulted(ctx, "run", evalFile, "--results", s.results, "--json")
			var faultAt time.Time
			select {
			case <-w.nth:
			case <-r.done:
				t.Fatalf("mst run ended (exit %d) before %d transcripts were written\n%s", r.code, n, r.stderr.String())
			}
			var renewMet <-chan struct{}
			switch {
			case row.moment == renew:
				// The next lock call while trials are still
				// written meets the fault (a renewal), and only
				// it: the renewal after it and the release pass.
				// Transcript writes wait for that renewal, so a
				// run quicker than a renewal's period still meets
				// it mid-run.
				renewHit := make(chan struct{})
				s.proxy.SetBefore(func(r *http.Request) {
					if isTranscriptWrite(r) {
						select {
						case <-renewHit:
						case <-time.After(3 * time.Second):
						}
					}
				})
				var once sync.Once
				renewMet = s.proxy.Set(row.fault, func(r *http.Request) bool {
					w.match(r) // the writes go on being counted
					hit := false
					if isLockCall(r) && w.writes.Load() < quickstartTrials {
						once.Do(func() { hit = true; close(renewHit) })
					}
					return hit
				})
			case row.writesOnly:
				s.proxy.Set(row.fault, isTranscriptWrite)
			default:
				s.proxy.Set(row.fault, nil)
			}
			faultAt = time.Now()
			select {
			case <-r.done:
			case <-time.After(3 * storeFaultBound):
				cancel()
				<-r.done
				t.Fatalf("mst run under %s %s had not ended %s after the fault (hangs)\n%s", row.fault, row.moment, 3*storeFaultBound, r.stderr.String())
			}
			took := time.Since(faultAt)
			if renewMet != nil {
				select {
				case <-renewMet:
				default:
					t.Fatalf("no lease renewal met the fault before the run wrote its last transcript (the lease is renewed every 500ms)\n%s", r.stderr.String())
				}
			}
			stderr := r.stderr.String()
			t.Logf("%s at %s on %s: exit %d, %s from the fault to the end", row.fault, row.moment, row.kind, r.code, took.Round(time.Millisecond))
			m := resultsLine.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("mst run printed no results: …/quickstart/runs/RUN-ID/ line:\n%s", stderr)
			}
			runURL, id := m[1], m[2]
			before := s.transcripts(t, id)
			t.Logf("%d of %d transcripts stored", before, quickstartTrials)
			if r.code != row.exit {
				t.Errorf("mst run under %s %s exited %d, want %d\n%s", row.fault, row.moment, r.code, row.exit, stderr)
			}
			if r.code == 0 && before < quickstartTrials {
				t.Errorf("mst run exited 0 with %d of %d transcripts stored", before, quickstartTrials)
			}
			if row.lost && before == quickstartTrials {
				t.Errorf("every transcript was stored; the fault came too late to test a lost trial")
			}
			if took > storeFaultBound {
				t.Errorf("mst run under %s %s took %s from the fault to its end, want less than %s", row.fault, row.moment, took, storeFaultBound)
			}
			if row.outage != "" && !strings.Contains(stderr, "kept none of the last") {
				t.Errorf("mst run under %s %s did not say it stopped for its store:\n%s", row.fault, row.moment, stderr)
			}
			if r.code != 0 {
				// The hint quotes a URL with a query for the shell.
				for _, want := range []string{"store not answering", "mst run --resume ", runURL} {
					if !strings.Contains(stderr, want) {
						t.Errorf("mst run under %s %s said:\n%s\nwant it to say %q", row.fault, row.moment, stderr, want)
					}
				}
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", stderr)
			}

			// The store answers again: the resume runs the missing
			// trials, and only them.
			resumed := newWatcher(quickstartTrials + 1)
			s.proxy.Set(blobtest.Pass, resumed.match)
			res := runCLI(t, "run", "--resume", runURL, "--json")
			if res.code != 0 {
				t.Fatalf("mst run --resume %s exited %d\n%s", runURL, res.code, res.stderr)
			}
			if after := s.transcripts(t, id); after != quickstartTrials {
				t.Errorf("after the resume %d transcripts are stored, want %d", after, quickstartTrials)
			}
			ran := -1
			if m := startLine.FindStringSubmatch(res.stderr); m != nil {
				ran, _ = strconv.Atoi(m[1])
			}
			if ran != quickstartTrials-before || resumed.writes.Load() != int64(quickstartTrials-before) {
				t.Errorf("the resume said it ran %d trials and wrote %d transcripts, want the %d missing\n%s", ran, resumed.writes.Load(), quickstartTrials-before, res.stderr)
			}
		})
	}
}

// TestStoreFaultAtStart: a store that fails in any way from the start is
// refused before any server or trial starts, within blobstore.DefaultOpen
// and a margin, with exit code 2, naming the store and saying what it
// met; nothing is left in the bucket.
func TestStoreFaultAtStart(t *testing.T) {
	// Not parallel: it sets the clouds' variables.
	rows := []struct {
		fault blobtest.Fault
		kind  string
	}{
		{blobtest.Refuse, "s3"},
		{blobtest.Hang, "gs"},
		{blobtest.Status(500), "s3"},
		{blobtest.Status(503), "gs"},
		{blobtest.Cut, "s3"},
		{blobtest.Trickle, "gs"},
	}
	for _, row := range rows {
		t.Run(strings.ReplaceAll(row.fault.String(), " ", "")+"/"+row.kind, func(t *testing.T) {
			s := startFaultStore(t, row.kind)
			s.proxy.TrickleEvery = 200 * time.Millisecond
			evalFile := quickstartCopy(t)
			t.Chdir(t.TempDir())
			s.proxy.Set(row.fault, nil)
			start := time.Now()
			r := runCLI(t, "run", evalFile, "--results", s.results)
			took := time.Since(start)
			t.Logf("%s from the start on %s: exit %d after %s", row.fault, row.kind, r.code, took.Round(time.Millisecond))
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			if bound := blobstore.DefaultOpen + 5*time.Second; took > bound {
				t.Errorf("took %s to end, want less than %s", took, bound)
			}
			for _, want := range []string{strings.SplitN(s.results, "?", 2)[0], "store not answering"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("said:\n%s\nwant it to say %q", r.stderr, want)
				}
			}
			if strings.Contains(r.stderr, "trials (") {
				t.Errorf("the run started:\n%s", r.stderr)
			}
			if keys := listKeys(t, s.bucket, ""); len(keys) > 0 {
				t.Errorf("the refused run left %v in the bucket", keys)
			}
		})
	}
}
