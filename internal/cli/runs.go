package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/detach"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/transcript"
)

// runsFlags are what every mst runs command takes: the eval config and
// the results, as the run was given them.
type runsFlags struct {
	config, results string
	json            bool
	// interval is how often watch reads the status (hidden, for tests).
	interval time.Duration
	parts    *builtin.Parts
}

func (f *runsFlags) add(cmd *cobra.Command, json bool, parts *builtin.Parts) {
	f.parts = parts
	cmd.Flags().StringVarP(&f.config, "config", "c", "", "the eval config the runs were launched with (its name and results.store say where their records are)")
	cmd.Flags().StringVar(&f.results, "results", "", "the result store the runs were launched with (gs://BUCKET/PREFIX or s3://BUCKET/PREFIX), when not the config's results.store")
	if json {
		cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	}
}

func newRunsCmd(stdio Stdio) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Follow, list and cancel detached runs (mst run --detach)",
		Long: `Detached runs (mst run --detach, mst grade --detach) run their coordinator on a
machine of their own and keep their records beside the eval's runs in the
result store: a status rewritten every 30 s, and the coordinator's log,
uploaded every minute. These commands read those records, never the machines,
so they work from any machine that can read the store.

Each takes the eval config (-c) and --results as the run was launched. A
detached run is named by its id, or by its last six characters.

A run whose coordinator has not written its status for five minutes shows as
lost: its machine died or lost the network.
mst run --resume RUN --results STORE-URL --secrets-file YOUR-SECRETS-FILE --detach
finishes its run on a new coordinator machine (the secrets file is not kept
anywhere: give yours again).`,
		Example: `  mst runs list -c eval.yaml --results gs://my-bucket/mst
  mst runs watch 4f2a9c -c eval.yaml --results gs://my-bucket/mst
  mst runs logs 4f2a9c -c eval.yaml --results gs://my-bucket/mst
  mst runs cancel 4f2a9c -c eval.yaml --results gs://my-bucket/mst`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRunsListCmd(stdio), newRunsStatusCmd(stdio), newRunsWatchCmd(stdio), newRunsLogsCmd(stdio), newRunsCancelCmd(stdio))
	return cmd
}

// openRecords finds the records of the eval that f names.
func (f *runsFlags) open(ctx context.Context) (*detach.Records, string, error) {
	if f.config == "" {
		return nil, "", withCode(ExitUsage, errors.New("give the eval config the runs were launched with: -c EVAL"))
	}
	cfg, err := eval.LoadWith(f.config, catalog(f.parts), eval.LoadOptions{DatasetsLoaded: true})
	if err != nil {
		return nil, "", withCode(ExitUsage, err)
	}
	loc := f.results
	if loc == "" {
		loc = cfg.Results
	}
	recs, st, err := detachedRecords(ctx, f.parts.ResultStores(), loc, cfg.Name)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			err = withCode(ExitUsage, errors.New(strings.Replace(ee.err.Error(), "--detach: ", "", 1)+" (give --results as the run was launched)"))
		}
		return nil, "", err
	}
	return recs, st.Location(), nil
}

func newRunsListCmd(stdio Stdio) *cobra.Command {
	var f runsFlags
	cmd := &cobra.Command{
		Use:   "list -c EVAL",
		Short: "List the eval's detached runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, where, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			list, bad, err := recs.List(cmd.Context())
			if err != nil {
				return err
			}
			now := stdio.now()
			if f.json {
				out := []statusJSON{}
				for _, s := range list {
					out = append(out, toJSON(s, now))
				}
				return writeJSON(stdio.Out, out)
			}
			if len(list) == 0 && len(bad) == 0 {
				fmt.Fprintf(stdio.Err, "no detached run of this eval in %s\n", where)
				return nil
			}
			tw := tabwriter.NewWriter(stdio.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tPHASE\tTRIALS\tRUN\tLAUNCHED\tRUNNER")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", transcript.Printable(s.ID), s.Shown(now), s.Phase, counts(s), orDash(transcript.Printable(s.Run)), s.Launched.Local().Format("2006-01-02 15:04"), s.Runner)
			}
			tw.Flush()
			for id, err := range bad {
				fmt.Fprintf(stdio.Err, "mst: warning: detached run %s: %v\n", transcript.Printable(id), err)
			}
			return nil
		},
	}
	f.add(cmd, true, stdio.parts())
	return cmd
}

// counts says how far the run's trials are.
func counts(s detach.Status) string {
	if s.Planned == 0 && s.Collected == 0 && s.Graded == 0 {
		return "-"
	}
	if s.Phase == detach.PhaseGrade || s.Command == detach.CommandGrade {
		return fmt.Sprintf("%d/%d graded", s.Graded, s.Planned)
	}
	return fmt.Sprintf("%d/%d", s.Collected, s.Planned)
}

// statusJSON is a status as mst runs --json prints it: with the state as
// shown now.
type statusJSON struct {
	detach.Status
	Shown string `json:"shown"`
}

func toJSON(s detach.Status, now time.Time) statusJSON {
	return statusJSON{Status: s, Shown: s.Shown(now)}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// oneRun resolves the id argument of a runs command.
func (f *runsFlags) oneRun(ctx context.Context, ref string) (*detach.Records, string, error) {
	recs, _, err := f.open(ctx)
	if err != nil {
		return nil, "", err
	}
	id, err := recs.Resolve(ctx, ref)
	if err != nil {
		return nil, "", withCode(ExitUsage, err)
	}
	return recs, id, nil
}

// readOne resolves ref and reads its status.
func (f *runsFlags) readOne(ctx context.Context, ref string) (*detach.Records, detach.Status, error) {
	recs, id, err := f.oneRun(ctx, ref)
	if err != nil {
		return nil, detach.Status{}, err
	}
	s, err := recs.ReadStatus(ctx, id)
	return recs, s, err
}

func newRunsStatusCmd(stdio Stdio) *cobra.Command {
	var f runsFlags
	cmd := &cobra.Command{
		Use:   "status ID -c EVAL",
		Short: "Show one detached run's status",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, s, err := f.readOne(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(stdio.Out, toJSON(s, stdio.now()))
			}
			writeStatus(stdio.Out, s, stdio.now(), recs)
			return nil
		},
	}
	f.add(cmd, true, stdio.parts())
	return cmd
}

// writeStatus prints s for people.
func writeStatus(w io.Writer, s detach.Status, now time.Time, recs *detach.Records) {
	state := s.Shown(now)
	if s.Phase != "" && !s.Over() {
		state += " (" + s.Phase + ")"
	}
	if s.Cancelling && !s.Over() {
		state += ", cancelling"
	}
	fmt.Fprintf(w, "detached run %s\n", transcript.Printable(s.ID))
	fmt.Fprintf(w, "  state      %s\n", state)
	if s.Run != "" {
		fmt.Fprintf(w, "  run        %s\n", transcript.Printable(s.Run))
	}
	if s.GradeSet != "" {
		fmt.Fprintf(w, "  grade set  %s\n", s.GradeSet)
	}
	if c := counts(s); c != "-" {
		fmt.Fprintf(w, "  trials     %s collected, %d graded, of %d\n", strings.SplitN(c, "/", 2)[0], s.Graded, s.Planned)
	}
	fmt.Fprintf(w, "  runner     %s", s.Runner)
	if s.Machine != "" {
		fmt.Fprintf(w, ", coordinator machine %s", s.Machine)
	}
	fmt.Fprintln(w)
	if s.Identity != "" {
		fmt.Fprintf(w, "  runs as    %s\n", s.Identity)
	}
	fmt.Fprintf(w, "  launched   %s\n", s.Launched.Local().Format(time.RFC3339))
	if s.Ended != nil {
		fmt.Fprintf(w, "  ended      %s\n", s.Ended.Local().Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "  heartbeat  %s ago\n", now.Sub(s.Updated).Round(time.Second))
	}
	if s.ExitCode != nil && s.Over() {
		fmt.Fprintf(w, "  exit code  %d\n", *s.ExitCode)
	}
	for i, c := range s.Commands {
		label := "           "
		if i == 0 {
			label = "  commands "
		}
		fmt.Fprintf(w, "%s %s\n", label, c)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "  error      %s\n", s.Error)
	}
	if s.Shown(now) == detach.StateLost {
		fmt.Fprintf(w, "  the coordinator has not written its status since %s: its machine is gone or cut off.\n  Finish the run on a new coordinator machine with: %s\n", s.Updated.Local().Format(time.RFC3339), s.ResumeHint())
	}
	if len(s.LastLines) > 0 {
		fmt.Fprintln(w, "  last lines:")
		for _, l := range s.LastLines {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	fmt.Fprintf(w, "  records    %s\n", recs.Where(s.ID))
}

func newRunsWatchCmd(stdio Stdio) *cobra.Command {
	var f runsFlags
	cmd := &cobra.Command{
		Use:   "watch ID -c EVAL",
		Short: "Follow a detached run until it ends",
		Long: `Follow a detached run: print a line each time its state, phase or counts change,
then its status once it has ended.

Exit codes: the run's own (0, 4, 5 as mst run gives them) when it is done; 1
when it failed; 3 when it was cancelled or its coordinator is lost (what was
collected is kept: mst run --resume RUN --results STORE-URL --secrets-file
YOUR-SECRETS-FILE --detach finishes it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			recs, id, err := f.oneRun(ctx, args[0])
			if err != nil {
				return err
			}
			interval := f.interval
			if interval <= 0 {
				interval = 5 * time.Second
			}
			last := ""
			failures := 0
			for {
				s, err := recs.ReadStatus(ctx, id)
				if err != nil {
					failures++
					if failures >= 5 || ctx.Err() != nil {
						return err
					}
					fmt.Fprintf(stdio.Err, "mst: warning: %v; trying again\n", err)
				} else {
					failures = 0
					now := stdio.now()
					line := fmt.Sprintf("%s %s %s", s.Shown(now), s.Phase, counts(s))
					if line != last {
						fmt.Fprintf(stdio.Err, "%s  %s\n", now.Local().Format("15:04:05"), watchLine(s, now))
						last = line
					}
					switch state := s.Shown(now); state {
					case detach.StateDone, detach.StateFailed, detach.StateCancelled, detach.StateLost:
						writeStatus(stdio.Out, s, now, recs)
						return watchExit(s, state)
					}
				}
				select {
				case <-ctx.Done():
					return withCode(ExitInterrupted, errors.New("interrupted: the detached run goes on; mst runs watch follows it again"))
				case <-time.After(interval):
				}
			}
		},
	}
	f.add(cmd, false, stdio.parts())
	cmd.Flags().DurationVar(&f.interval, "interval", 0, "how often to read the status (default 5s)")
	cmd.Flags().MarkHidden("interval")
	return cmd
}

func watchLine(s detach.Status, now time.Time) string {
	parts := []string{s.Shown(now)}
	if s.Phase != "" && !s.Over() {
		parts = append(parts, s.Phase)
	}
	if c := counts(s); c != "-" {
		parts = append(parts, c)
	}
	if s.Run != "" {
		parts = append(parts, "run "+transcript.Printable(s.Run))
	}
	return strings.Join(parts, "  ")
}

// watchExit is mst runs watch's exit for a run that ended in state.
func watchExit(s detach.Status, state string) error {
	switch state {
	case detach.StateDone:
		if s.ExitCode != nil && *s.ExitCode != 0 {
			return withCode(ExitCode(*s.ExitCode), fmt.Errorf("the detached run %s is done, and its last command exited with code %d (%s)", s.ID, *s.ExitCode, ExitCode(*s.ExitCode).Meaning()))
		}
		return nil
	case detach.StateFailed:
		return fmt.Errorf("the detached run %s failed: %s", s.ID, orDash(s.Error))
	case detach.StateCancelled:
		return withCode(ExitPartial, fmt.Errorf("the detached run %s was cancelled; what was collected is kept in run %s", s.ID, orDash(s.Run)))
	}
	return withCode(ExitPartial, fmt.Errorf("the coordinator of %s is lost; finish its run with %s", s.ID, s.ResumeHint()))
}

func newRunsLogsCmd(stdio Stdio) *cobra.Command {
	var f runsFlags
	cmd := &cobra.Command{
		Use:   "logs ID -c EVAL",
		Short: "Print a detached run's coordinator log (as last uploaded: every minute, and at the end)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, id, err := f.oneRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			data, err := recs.ReadLog(cmd.Context(), id)
			if errors.Is(err, detach.ErrNotFound) {
				fmt.Fprintf(stdio.Err, "the coordinator of %s has uploaded no log yet (it does every minute)\n", id)
				return nil
			}
			if err != nil {
				return err
			}
			_, err = stdio.Out.Write(data)
			return err
		},
	}
	f.add(cmd, false, stdio.parts())
	return cmd
}

func newRunsCancelCmd(stdio Stdio) *cobra.Command {
	var f runsFlags
	cmd := &cobra.Command{
		Use:   "cancel ID -c EVAL",
		Short: "Cancel a detached run: its command under way is interrupted as Ctrl-C would, what was collected is kept",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, s, err := f.readOne(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			id := s.ID
			if s.Over() {
				return withCode(ExitUsage, fmt.Errorf("the detached run %s has already ended (%s): there is nothing to cancel", id, s.State))
			}
			host, _ := os.Hostname()
			if err := recs.Cancel(cmd.Context(), id, fmt.Sprintf("cancelled by mst runs cancel on %s at %s", host, stdio.now().UTC().Format(time.RFC3339))); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Err, "asked %s to stop: its coordinator sees it at its next heartbeat (every 30 s), interrupts the command under way and keeps what was collected; mst runs watch %s shows it end\n", id, shortID(id))
			if s.Shown(stdio.now()) == detach.StateLost {
				fmt.Fprintf(stdio.Err, "mst: warning: its coordinator is lost, so nothing may read the request; %s finishes the run instead\n", s.ResumeHint())
			}
			return nil
		},
	}
	f.add(cmd, false, stdio.parts())
	return cmd
}
