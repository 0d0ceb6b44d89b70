package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// Where runs are kept: a folder, or a bucket by URL (gs://BUCKET/PREFIX,
// s3://BUCKET/PREFIX?…). Anything written as a URL is one: a scheme MST
// does not serve is refused, never taken for a folder named "gs:".

// urlForm matches a location written as a URL: a scheme of two or more
// characters and a colon (C:\runs, a Windows drive, is a folder).
var urlForm = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]+:`)

// isURL says loc is written as a URL rather than a folder.
func isURL(loc string) bool { return urlForm.MatchString(loc) }

// storeFolder is the folder of a directory store's location: loc itself,
// or the path of a file:// URL. ok is false for any other URL.
func storeFolder(loc string) (folder string, ok bool, err error) {
	if !isURL(loc) {
		return loc, true, nil
	}
	u, err := url.Parse(loc)
	if err != nil || !strings.EqualFold(u.Scheme, "file") {
		return "", false, nil
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", false, fmt.Errorf("%s: a file:// URL names a folder on this machine (file:///path); to keep results elsewhere use gs://BUCKET/PREFIX or s3://BUCKET/PREFIX", loc)
	}
	return u.Path, true, nil
}

// locate reads a store location as the URL the result store registry
// serves: a folder (a plain path, or a file:// URL) as a file: URL, any
// other location as written.
func locate(loc string) (*url.URL, error) {
	folder, ok, err := storeFolder(loc)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	if ok {
		return &url.URL{Scheme: store.DirScheme, Path: folder}, nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		// (url.Parse's error quotes the URL, which may hold a password.)
		return nil, withCode(ExitUsage, errors.New("the store location is not a URL MST can read: write gs://BUCKET/PREFIX or s3://BUCKET/PREFIX, with %XX escapes only for bytes a URL cannot hold"))
	}
	return u, nil
}

// storeKind is the result store kind that serves u (as loc gave it), or
// the error a person can act on.
func storeKind(reg *store.Registry, u *url.URL, loc string) (*store.Definition, error) {
	d, err := reg.Lookup(u.Scheme)
	if err != nil {
		err = fmt.Errorf("%s: %w", u.Redacted(), err)
		if !strings.Contains(loc, "@") {
			err = fmt.Errorf("%w\n(a folder whose name has a colon in it is written as a path: ./%s)", err, loc)
		}
		return nil, withCode(ExitUsage, err)
	}
	return d, nil
}

// storeError gives a store's error its exit code: a location MST cannot
// use, or a store that cannot be reached (it refuses, or does not answer
// within its bound for opening), is a mistake in where the user pointed
// MST, like a malformed URL: exit code 2, before anything starts.
func storeError(err error) error {
	if errors.Is(err, store.ErrBadLocation) || errors.Is(err, store.ErrUnavailable) {
		return withCode(ExitUsage, err)
	}
	return err
}

// LeaseEnv is a test hook: how long a run's lock in a bucket holds
// without renewal (a duration; default a minute), so that tests of a
// writer killed mid-run need not wait a minute for its lock to go.
const LeaseEnv = "MST_STORE_LEASE"

// CallEnv is a test hook: how long one call to a bucket store may take,
// its retries included (a duration; default blobstore.DefaultCall), so
// that tests of a store that stops answering need not wait half a minute
// for each write to give up. Each try gets a third of it, the first retry
// waits a thirtieth.
const CallEnv = "MST_STORE_CALL"

// storeReports is the context key of where a command reports a bucket
// store's retries (withStoreReports).
type storeReports struct{}

// withStoreReports makes the bucket stores opened under ctx report each
// retry as a line on w ("mst: store not
// answering (gs://b/p): retry 3 in 4s: connection refused by …"): a
// person waiting sees what MST waits for.
func withStoreReports(ctx context.Context, w io.Writer) context.Context {
	var mu sync.Mutex
	report := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "mst: %s\n", what)
	}
	return context.WithValue(ctx, storeReports{}, report)
}

// OutageEnv is a test hook: how long a run goes on while its store keeps
// none of its transcripts (a duration; default run.DefaultOutageLimit).
const OutageEnv = "MST_STORE_OUTAGE"

// outageLimit is OutageEnv's duration, or 0 for the default.
func outageLimit() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(OutageEnv)); err == nil && d > 0 {
		return d
	}
	return 0
}

// storeParams are the settings of the result stores MST opens under ctx,
// for eval: retries reported where withStoreReports said, and the test
// hooks' bounds.
func storeParams(ctx context.Context, eval string) store.Params {
	p := store.Params{Eval: eval}
	if report, ok := ctx.Value(storeReports{}).(func(string)); ok {
		p.Retrying = report
	}
	if d, err := time.ParseDuration(os.Getenv(LeaseEnv)); err == nil && d > 0 {
		p.Lease = d
	}
	if d, err := time.ParseDuration(os.Getenv(CallEnv)); err == nil && d > 0 {
		p.Call = d
	}
	return p
}

// resultsStore opens the store at loc (--results, or the config's
// results) for new runs of eval, through the result store of its scheme.
func resultsStore(ctx context.Context, reg *store.Registry, loc, eval string) (store.Store, error) {
	u, err := locate(loc)
	if err != nil {
		return nil, err
	}
	d, err := storeKind(reg, u, loc)
	if err != nil {
		return nil, err
	}
	st, err := d.Open(ctx, u, storeParams(ctx, eval))
	return st, storeError(err)
}

// openURLRun opens the run a location names, or says what it names
// instead and what to give.
func openURLRun(ctx context.Context, reg *store.Registry, ref string, redact *secrets.Redactor) (store.Run, error) {
	u, err := locate(ref)
	if err != nil {
		return nil, err
	}
	d, err := storeKind(reg, u, ref)
	if err != nil {
		return nil, err
	}
	r, err := d.OpenRun(ctx, u, storeParams(ctx, ""), redact)
	return r, storeError(err)
}

// openStoredRun opens a run by reference: a folder or a URL, or a run id
// in the results store (--results, else the default folder).
func openStoredRun(ctx context.Context, reg *store.Registry, ref, results string, redact *secrets.Redactor) (store.Run, bool, error) {
	if isURL(ref) {
		if _, ok, _ := storeFolder(ref); !ok {
			r, err := openURLRun(ctx, reg, ref, redact)
			return r, true, err
		}
		folder, _, _ := storeFolder(ref)
		ref = folder
	}
	if results == "" || !isURL(results) {
		return nil, false, nil // the folder lookups of openRun
	}
	if folder, ok, err := storeFolder(results); err != nil {
		return nil, true, err
	} else if ok {
		r, err := store.Dir{Root: folder}.Open(ctx, ref, redact)
		return r, true, err
	}
	s, err := resultsStore(ctx, reg, results, "")
	if err != nil {
		return nil, true, err
	}
	r, err := s.Open(ctx, ref, redact)
	if err != nil {
		return nil, true, fmt.Errorf("%s: no run with that id in %s (%w)", ref, results, err)
	}
	return r, true, nil
}

// listRunsIfListing prints the runs of an eval, newest first, when ref is
// an eval's runs: PREFIX/EVAL/runs/ in a bucket, or a folder ROOT/EVAL/runs
// of a results folder. listed says it was.
func listRunsIfListing(ctx context.Context, stdio Stdio, ref string, asJSON bool) (listed bool, err error) {
	var runs []store.RunSummary
	column := "URL"
	if _, ok, _ := storeFolder(ref); ok {
		column = "FOLDER"
	}
	u, err := locate(ref)
	if err != nil {
		return false, nil // openRun reports what is wrong with it
	}
	d, err := stdio.parts().ResultStores().Lookup(u.Scheme)
	if err != nil {
		return false, nil // openRun reports what is wrong with it
	}
	runs, ok, err := d.ListRuns(ctx, u, storeParams(ctx, ""))
	if !ok {
		return false, nil // openRun reports what is wrong with it
	}
	if err != nil {
		return true, storeError(err)
	}
	if asJSON {
		type row struct {
			ID      string    `json:"id"`
			URL     string    `json:"url,omitempty"`
			Folder  string    `json:"folder,omitempty"`
			Started time.Time `json:"started,omitzero"`
			Collect string    `json:"collect,omitempty"`
			Planned int       `json:"planned"`
			Done    int       `json:"done"`
			Problem string    `json:"problem,omitempty"`
		}
		rows := []row{}
		for _, sum := range runs {
			rw := row{ID: sum.ID, Started: sum.Record.Started, Collect: string(sum.Record.Collect),
				Planned: sum.Record.Counts.Planned, Done: sum.Record.Counts.Done()}
			if column == "URL" {
				rw.URL = sum.Location
			} else {
				rw.Folder = sum.Location
			}
			if sum.Err != nil {
				rw.Problem = sum.Err.Error()
			}
			rows = append(rows, rw)
		}
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return true, enc.Encode(rows)
	}
	writeRunList(stdio.Out, ref, column, runs)
	return true, nil
}

// writeRunList prints one line per run, newest first; column names the
// last one (URL, FOLDER).
func writeRunList(w io.Writer, ref, column string, runs []store.RunSummary) {
	if len(runs) == 0 {
		fmt.Fprintf(w, "no runs in %s\n", ref)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTARTED\tCOLLECT\tTRIALS\t"+column)
	for _, s := range runs {
		if s.Err != nil {
			fmt.Fprintf(tw, "%s\t\tunreadable\t\t%s\n", s.ID, s.Location)
			continue
		}
		started := ""
		if !s.Record.Started.IsZero() {
			started = s.Record.Started.UTC().Format("2006-01-02 15:04 UTC")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", s.ID, started, s.Record.Collect, s.Record.Counts.Done(), s.Record.Counts.Planned, s.Location)
	}
	tw.Flush()
}

// runNotFound is the error of a run reference that names no run folder
// when looking it up as an id in the results folder failed with err. An
// id that names two runs keeps the error that lists them; a folder of an
// eval's runs says so.
func runNotFound(ref, results string, err error) error {
	switch {
	case store.IsRunsDir(ref):
		return withCode(ExitUsage, fmt.Errorf("%s is an eval's runs (mst report %s lists them), not a run: give one run's folder, %s/RUN-ID", ref, ref, filepath.Clean(ref)))
	case errors.Is(err, store.ErrAmbiguous):
		return withCode(ExitUsage, err)
	}
	return fmt.Errorf("%s: no run folder there, nor a run with that id in %s", ref, results)
}

// checkWorkerFolder refuses a URL as a worker's results: a worker writes
// to a folder of its machine.
func checkWorkerFolder(loc string) error {
	if _, ok, err := storeFolder(loc); err != nil || !ok {
		return errors.Join(err, fmt.Errorf("--results %s: mst collect writes to a folder of this machine; the coordinator keeps the run in its store", loc))
	}
	return nil
}
