package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// runHTMLName is the HTML report's name in a run's folder.
const runHTMLName = "report.html"

// addHTMLFlag gives mst report the flag --html FILE: the report is also
// written as one self-contained HTML file, before the command does the
// rest of its work (so a gate that fails the command still leaves the
// file for a CI artifact).
func addHTMLFlag(cmd *cobra.Command, stdio Stdio) {
	var file string
	cmd.Flags().StringVar(&file, "html", "", "also write the report, with every transcript, as one self-contained HTML `FILE` (it opens offline, e.g. from a CI artifact)")
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if file != "" {
			st, err := openRun(c.Context(), stdio.parts().ResultStores(), args[0], "", nil)
			if err != nil {
				return err
			}
			rep, err := run.LoadReportWith(c.Context(), st, run.ReportOptions{Graders: stdio.Parts.Graders()})
			if err != nil {
				return err
			}
			if err := writeHTMLFile(c.Context(), file, rep, st, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Err, "html report: %s\n", file)
		}
		return inner(c, args)
	}
}

// writeRunHTML writes the HTML report of a finished run into its folder
// (report.html) and says where; a run whose store is not a folder gets
// none. It never fails the run: a report that cannot be written is a
// warning, and mst report --html can write it later. It runs on a context
// that Ctrl-C does not end, so an interrupted run still gets its report.
func writeRunHTML(ctx context.Context, out *run.Outcome, stderr io.Writer, redact *secrets.Redactor) {
	if out == nil {
		return
	}
	dir := out.Store.Location()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return // a run in a bucket: mst report --html writes its page
	}
	path := filepath.Join(dir, runHTMLName)
	// The run's report is built in memory from the config as written: the
	// page passes the redactor like everything else the run stores.
	if err := writeHTMLFile(context.WithoutCancel(ctx), path, out.Report, out.Store, redact); err != nil {
		fmt.Fprintf(stderr, "mst: warning: no HTML report: %s (mst report %s --html FILE writes one)\n", err, dir)
		return
	}
	fmt.Fprintf(stderr, "html report: %s\n", path)
}

// writeHTMLFile writes the HTML report of st to path whole or not at all:
// into a temporary file next to it, renamed into place.
func writeHTMLFile(ctx context.Context, path string, rep report.Report, st store.Run, redact *secrets.Redactor) error {
	rec, err := st.ReadRun(ctx)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("--html %s: %w (give a file in a folder that exists and that you can write)", path, err)
	}
	defer os.Remove(f.Name())
	var w io.Writer = f
	var rw *secrets.Writer
	if redact != nil {
		rw = redact.Writer(f)
		w = rw
	}
	if err := htmlreport.Write(ctx, w, rep, rec, st); err != nil {
		f.Close()
		return err
	}
	if rw != nil {
		if err := rw.Flush(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
