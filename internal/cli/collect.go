package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/store"
)

// VersionOverrideEnv is a test hook, read by the workers (`mst collect`,
// `mst grade-shard`) only: when set,
// the worker reports its value as its MST version in hello, so tests can
// start a worker "of another version" and check that the coordinator
// refuses it before any trial. No other command reads it, and it changes
// nothing else.
const VersionOverrideEnv = "MST_VERSION_OVERRIDE"

// workerFlags are the flags both workers take.
type workerFlags struct {
	bundleDir, results string
	verbose            bool
	heartbeat          time.Duration
}

func (f *workerFlags) add(cmd *cobra.Command, results string) {
	cmd.Flags().StringVar(&f.bundleDir, "bundle", "", "the shard's bundle folder")
	cmd.Flags().StringVar(&f.results, "results", "", results)
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "log details on stderr")
	cmd.Flags().DurationVar(&f.heartbeat, "heartbeat", shard.HeartbeatEvery, "how often the worker sends a heartbeat")
	cmd.MarkFlagRequired("bundle")
	cmd.MarkFlagRequired("results")
}

// workerStart is what a worker has once it started: the secrets it will
// receive and their redactor, its results folder (locked), its bundle, a
// redacting stderr, its logger and the version it reports.
type workerStart struct {
	set     *secrets.Set
	redact  *secrets.Redactor
	results *store.DirRun
	bundle  *shard.Bundle
	stderr  *secrets.Writer
	logger  *slog.Logger
	version string
	done    func()
}

// startWorker does what both workers do first. One folder, one writer: a
// second worker given the results folder (two runs sharing a shard
// folder) is refused, naming the first, before it reads or writes
// anything. done releases the folder and flushes stderr.
func startWorker(ctx context.Context, stdio Stdio, f *workerFlags, name string) (*workerStart, error) {
	w := &workerStart{set: secrets.New()}
	w.redact = secrets.NewRedactor(w.set)
	if err := checkWorkerFolder(f.results); err != nil {
		return nil, withCode(ExitUsage, err)
	}
	if err := os.MkdirAll(f.results, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w.results = store.OpenDir(f.results, w.redact)
	release, err := w.results.Lock(ctx, run.Self(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if w.bundle, err = shard.ReadBundle(f.bundleDir); err != nil {
		release()
		return nil, err
	}
	w.stderr = w.redact.Writer(stdio.Err)
	w.logger = newLogger(w.stderr, f.verbose)
	w.version = Version
	if v := envMap(stdio.Env)[VersionOverrideEnv]; v != "" {
		w.version = v
	}
	w.done = func() {
		w.stderr.Flush()
		release()
	}
	return w, nil
}

// newCollectCmd is the worker: runners start it on a machine, and it speaks
// mst.shard/v1 on its stdin and stdout. Nothing but protocol lines goes to
// stdout; logs go to stderr.
func newCollectCmd(stdio Stdio) *cobra.Command {
	var f workerFlags
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
			ws, err := startWorker(cmd.Context(), stdio, &f, "collect")
			if err != nil {
				return err
			}
			defer ws.done()
			b := ws.bundle
			work, err := runner.TempFolder("mst-worker-", b.Run.ID)
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			w := &shard.Worker{
				Clients: stdio.parts().Clients(), Plugins: stdio.parts().ShardPlugins, Results: ws.results, Secrets: ws.set,
				Environment: run.Environment(b.Run.Runner.Name), Logger: ws.logger,
				MSTVersion: ws.version, WorkDir: work, Heartbeat: f.heartbeat,
				// The image this machine runs, as its runner said.
				ImageDigest: envMap(stdio.Env)[shard.ImageDigestEnv],
			}
			if b.Store != "" {
				// The run is in a bucket: the worker writes its transcripts
				// there itself, with this machine's credentials.
				remote, isURL, err := openStoredRun(cmd.Context(), stdio.parts().ResultStores(), b.Store, "", ws.redact)
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
	f.add(cmd, "the folder the worker writes transcripts to")
	return cmd
}

// newGradeShardCmd is the grade worker: runners start it on a machine for
// a shard that grades (mst run --grade-runner, mst grade --runner). It
// speaks mst.shard/v1 on its stdin and stdout like mst collect, grades the
// transcripts its bundle holds with the bundle's graders, and writes the
// grades to --results for the coordinator to fetch. It loads no dataset
// and starts no client or server; its judges' keys come over the channel.
func newGradeShardCmd(stdio Stdio) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:    "grade-shard --bundle DIR --results DIR",
		Short:  "Grade one shard's transcripts as a worker (started by runners, not by hand)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			defer servers.GuardWorker()()
			ws, err := startWorker(cmd.Context(), stdio, &f, "grade-shard")
			if err != nil {
				return err
			}
			defer ws.done()
			w := &shard.GradeWorker{
				Providers: stdio.parts().Providers(), Graders: stdio.parts().Graders(), Plugins: stdio.parts().ShardPlugins,
				Results: f.results, Secrets: ws.set,
				Logger: ws.logger, MSTVersion: ws.version, Heartbeat: f.heartbeat,
				ImageDigest: envMap(stdio.Env)[shard.ImageDigestEnv],
			}
			return w.Run(cmd.Context(), ws.bundle, f.bundleDir, stdio.In, stdio.Out)
		},
	}
	f.add(cmd, "the folder the worker writes grades to")
	return cmd
}
