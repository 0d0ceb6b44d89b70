package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
	"github.com/spf13/cobra"
)

// Every --json output of mst is one JSON object that starts with its kind
// and version: {"kind": "mst.report", "version": 2, ...}. A list is held
// in a field named after what it lists. docs/reports.md lists the kinds.
const (
	kindClients   = "mst.clients"
	kindClient    = "mst.client"
	kindRunners   = "mst.runners"
	kindLeftovers = "mst.leftovers"
	kindValidate  = "mst.validation"
)

// envelope is the start of every --json object.
type envelope struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
}

// writeList writes items as {"kind": kind, "version": 1, field: items}.
func writeList[T any](w io.Writer, kind, field string, items []T) error {
	if items == nil {
		items = []T{}
	}
	var list bytes.Buffer
	enc := json.NewEncoder(&list)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(items); err != nil {
		return err
	}
	k, _ := json.Marshal(kind)
	f, _ := json.Marshal(field)
	return writeIndentedJSON(w, json.RawMessage(fmt.Appendf(nil, `{"kind":%s,"version":1,%s:%s}`, k, f, bytes.TrimSpace(list.Bytes()))))
}

// termWidth is the width that output to w should fit: COLUMNS when it is
// set to a number, else the terminal's width when w is a terminal, else 0
// (no limit: a file or a pipe gets whole lines).
func termWidth(stdio Stdio, w io.Writer) int {
	if c, ok := envMap(stdio.Env)["COLUMNS"]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(c)); err == nil && n > 0 {
			return n
		}
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if n, _, err := term.GetSize(int(f.Fd())); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// runGrades reads the latest grade of every trial of a stored run from the
// grade set its report shows (after run.LoadReport has graded what was not
// graded yet), so --junit and --failures agree with the table.
func runGrades(ctx context.Context, st store.Run, rep report.Report) ([]grade.TrialGrade, error) {
	var out []grade.TrialGrade
	set := ""
	if rep.Grades != nil {
		set = rep.Grades.ID
	}
	log, err := run.GradeSet(ctx, st, set)
	if err != nil {
		return nil, err
	}
	err = log.Grades(ctx, func(g grade.TrialGrade) error {
		out = append(out, g)
		return nil
	})
	return out, err
}

// runToolHashes gathers the tool hashes the transcripts of a stored run
// recorded.
func runToolHashes(ctx context.Context, st store.Run) (report.ToolHashes, error) {
	var h report.ToolHashes
	err := st.Transcripts(ctx, func(t *transcript.Transcript) error {
		h.Add(t)
		return nil
	})
	return h, err
}

// loadRun opens a stored run and builds its report.
func loadRun(ctx context.Context, reg *store.Registry, ref string, o run.ReportOptions) (store.Run, report.Report, error) {
	st, err := openRun(ctx, reg, ref, "", nil)
	if err != nil {
		return nil, report.Report{}, withCode(ExitUsage, err)
	}
	rep, err := run.LoadReportWith(ctx, st, o)
	if err != nil {
		return nil, report.Report{}, err
	}
	return st, rep, nil
}

// writeJUnitFile writes the JUnit XML of rep to path ("-": stdout).
func writeJUnitFile(stdio Stdio, path string, rep report.Report, grades []grade.TrialGrade) error {
	if path == "-" {
		return rep.WriteJUnit(stdio.Out, grades)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	if err := rep.WriteJUnit(f, grades); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	return nil
}

// reportFlags are mst report's output and gate flags.
type reportFlags struct {
	json, markdown, failures bool
	junit                    string
	gates                    gateFlags
}

func (rf *reportFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&rf.json, "json", false, "print the report as JSON (mst schema report describes it)")
	fl.BoolVar(&rf.markdown, "markdown", false, "print a short Markdown summary for a pull-request comment")
	fl.BoolVar(&rf.failures, "failures", false, "after the report, list the failed trials with their graders' reasons")
	fl.StringVar(&rf.junit, "junit", "", "also write the report as JUnit XML to `FILE` (- for stdout, instead of the report)")
	rf.gates.addPassRateFlag(fl)
	rf.gates.addMaxErroredFlag(fl)
	rf.gates.addBaselineFlag(fl)
	cmd.MarkFlagsMutuallyExclusive("json", "markdown")
}

// reportCommand is mst report RUN.
func reportCommand(ctx context.Context, stdio Stdio, ref string, rf reportFlags, gradeSet string) error {
	g, err := rf.gates.parse()
	if err != nil {
		return err
	}
	if rf.junit == "-" && (rf.json || rf.markdown) {
		return withCode(ExitUsage, errors.New("--junit - writes the XML to stdout: give it a file name to print --json or --markdown too"))
	}
	st, rep, err := loadRun(ctx, stdio.parts().ResultStores(), ref, run.ReportOptions{GradeSet: gradeSet, Graders: stdio.Parts.Graders()})
	if err != nil {
		return err
	}
	res, err := g.evaluate(ctx, stdio.parts(), rep, func() (report.ToolHashes, error) { return runToolHashes(ctx, st) })
	if err != nil {
		return err
	}
	var grades []grade.TrialGrade
	if rf.junit != "" || rf.failures {
		if grades, err = runGrades(ctx, st, rep); err != nil {
			return err
		}
	}
	if rf.junit != "" {
		if err := writeJUnitFile(stdio, rf.junit, rep, grades); err != nil {
			return err
		}
	}
	width := termWidth(stdio, stdio.Out)
	switch {
	case rf.junit == "-":
	case rf.json:
		err = writeIndentedJSON(stdio.Out, rep)
	case rf.markdown:
		err = rep.WriteMarkdown(stdio.Out, g.verdict(res))
		if err == nil && res.comparison != nil {
			err = res.comparison.WriteMarkdown(stdio.Out, g.verdict(res))
		}
	default:
		err = rep.WriteTextWidth(stdio.Out, width)
		if err == nil && res.comparison != nil {
			fmt.Fprintln(stdio.Out)
			fmt.Fprintln(stdio.Out, "Against the baseline run:")
			err = res.comparison.WriteTextWidth(stdio.Out, width)
		}
	}
	if err != nil {
		return err
	}
	if rf.failures && rf.junit != "-" {
		if !rf.json && !rf.markdown {
			fmt.Fprintln(stdio.Out)
		}
		// With --json or --markdown on stdout, the list goes to stderr.
		w := stdio.Out
		if rf.json || rf.markdown {
			w = stdio.Err
		}
		if err := rep.WriteFailures(w, grades, termWidth(stdio, w)); err != nil {
			return err
		}
	}
	return res.exit()
}
