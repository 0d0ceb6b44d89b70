package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/shard"
	"github.com/mst-eval/mst/store"
)

// VersionOverrideEnv is a test hook, read by the workers (`mst collect`,
// `mst grade-shard`) only: when set,
// the worker reports its value as its MST version in hello, so tests can
// start a worker "of another version" and check that the coordinator
// refuses it before any trial. No other command reads it, and it changes
// nothing else.
const VersionOverrideEnv = "MST_VERSION_OVERRIDE"

// newCollectCmd is the worker: runners start it on a machine, and it speaks
// mst.shard/v1 on its stdin and stdout. Nothing but protocol lines goes to
// stdout; logs go to stderr.
func newCollectCmd(stdio Stdio) *cobra.Command {
	var bundleDir, results string
	var verbose bool
	var heartbeat time.Duration
	cmd := &cobra.Command{
		Use:    "collect --bundle DIR --results DIR",
		Short:  "Run one shard's trials as a worker (started by runners, not by hand)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// A worker outlives no coordinator and leaves no server behind:
			// a failed write to a gone coordinator is an error, not a
			// SIGPIPE death, and every server group is stopped on return.
			defer servers.GuardWorker()()
			set := secrets.New()
			redact := secrets.NewRedactor(set)
			if err := checkWorkerFolder(results); err != nil {
				return withCode(ExitUsage, err)
			}
			// One folder, one writer: a second worker given this folder
			// (two runs sharing a shard folder) is refused, naming the
			// first, before it reads or writes anything.
			rs := store.OpenDir(results, redact)
			release, err := rs.Lock(cmd.Context(), run.Self(time.Now()))
			if err != nil {
				return fmt.Errorf("collect: %w", err)
			}
			defer release()
			b, err := shard.ReadBundle(bundleDir)
			if err != nil {
				return err
			}
			stderr := redact.Writer(stdio.Err)
			defer stderr.Flush()
			work, err := runner.TempFolder("mst-worker-", b.Run.ID)
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			version := Version
			if v := envMap(stdio.Env)[VersionOverrideEnv]; v != "" {
				version = v
			}
			w := &shard.Worker{
				Clients: builtin.Clients(), Results: rs, Secrets: set,
				Environment: run.Environment(b.Run.Runner.Name), Logger: newLogger(stderr, verbose),
				MSTVersion: version, WorkDir: work, Heartbeat: heartbeat,
			}
			if b.Store != "" {
				// The run is in a bucket: the worker writes its transcripts
				// there itself, with this machine's credentials.
				remote, isURL, err := openStoredRun(cmd.Context(), b.Store, "", redact)
				if err == nil && !isURL {
					err = fmt.Errorf("the bundle names the store %q, which is not a bucket URL", b.Store)
				}
				if err != nil {
					w.ResultsError = err
				} else {
					w.Results = remote
				}
			}
			return w.Run(cmd.Context(), b, stdio.In, stdio.Out)
		},
	}
	cmd.Flags().StringVar(&bundleDir, "bundle", "", "the shard's bundle folder")
	cmd.Flags().StringVar(&results, "results", "", "the folder the worker writes transcripts to")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log details on stderr")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat", shard.HeartbeatEvery, "how often the worker sends a heartbeat")
	cmd.MarkFlagRequired("bundle")
	cmd.MarkFlagRequired("results")
	return cmd
}

// newGradeShardCmd is the grade worker: runners start it on a machine for
// a shard that grades (mst run --grade-runner, mst grade --runner). It
// speaks mst.shard/v1 on its stdin and stdout like mst collect, grades the
// transcripts its bundle holds with the bundle's graders, and writes the
// grades to --results for the coordinator to fetch. It loads no dataset
// and starts no client or server; its judges' keys come over the channel.
func newGradeShardCmd(stdio Stdio) *cobra.Command {
	var bundleDir, results string
	var verbose bool
	var heartbeat time.Duration
	cmd := &cobra.Command{
		Use:    "grade-shard --bundle DIR --results DIR",
		Short:  "Grade one shard's transcripts as a worker (started by runners, not by hand)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			defer servers.GuardWorker()()
			set := secrets.New()
			redact := secrets.NewRedactor(set)
			if err := checkWorkerFolder(results); err != nil {
				return withCode(ExitUsage, err)
			}
			if err := os.MkdirAll(results, 0o700); err != nil {
				return fmt.Errorf("grade-shard: %w", err)
			}
			rs := store.OpenDir(results, redact)
			release, err := rs.Lock(cmd.Context(), run.Self(time.Now()))
			if err != nil {
				return fmt.Errorf("grade-shard: %w", err)
			}
			defer release()
			b, err := shard.ReadBundle(bundleDir)
			if err != nil {
				return err
			}
			stderr := redact.Writer(stdio.Err)
			defer stderr.Flush()
			version := Version
			if v := envMap(stdio.Env)[VersionOverrideEnv]; v != "" {
				version = v
			}
			w := &shard.GradeWorker{
				Providers: builtin.Providers(), Results: results, Secrets: set,
				Logger: newLogger(stderr, verbose), MSTVersion: version, Heartbeat: heartbeat,
			}
			return w.Run(cmd.Context(), b, bundleDir, stdio.In, stdio.Out)
		},
	}
	cmd.Flags().StringVar(&bundleDir, "bundle", "", "the grade shard's bundle folder (its transcripts beside it)")
	cmd.Flags().StringVar(&results, "results", "", "the folder the worker writes grades to")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log details on stderr")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat", shard.HeartbeatEvery, "how often the worker sends a heartbeat")
	cmd.MarkFlagRequired("bundle")
	cmd.MarkFlagRequired("results")
	return cmd
}
