// Package cli is mst's command line: commands, flags, human and --json
// output, and exit codes. Nothing else in MST touches the process's
// arguments, stdio or exit code, so every command runs in-process in tests.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Version is MST's version, set at build time with
// -ldflags "-X github.com/mst-eval/mst/internal/cli.Version=…".
var Version = "0.1.0-dev"

// Exit codes.
const (
	ExitOK          = 0
	ExitFailure     = 1 // the command could not do its work
	ExitUsage       = 2 // bad flags, or a config or dataset that does not validate
	ExitPartial     = 3 // the run finished partial: trials are missing (mst run --resume finishes it)
	ExitInterrupted = 130
)

// Stdio is the process's standard streams and environment.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
	// Env is the environment, as KEY=value strings.
	Env []string
}

// OSStdio returns the real process stdio.
func OSStdio() Stdio {
	return Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Env: os.Environ()}
}

// exitError carries an exit code to Main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// Main runs mst with args and returns the exit code.
func Main(ctx context.Context, args []string, stdio Stdio) int {
	root := newRoot(stdio)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stdio.Err, "mst: %s\n", strings.TrimRight(err.Error(), "\n"))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "flag") || strings.Contains(err.Error(), "arg(s)") {
		return ExitUsage
	}
	return ExitFailure
}

func newRoot(stdio Stdio) *cobra.Command {
	root := &cobra.Command{
		Use:   "mst",
		Short: "Test how AI clients use your MCP servers",
		Long: `mst runs evals: every case of a dataset, under every variant (a client, a model,
a set of MCP servers, alternative tool descriptions), several trials each. Each
trial leaves a transcript; graders score the transcripts; the report gives pass
rates per variant with confidence intervals, side by side.

Start with the quickstart, which runs offline with no keys:

  go build -o bin/ ./cmd/mst ./examples/quickstart/weather
  bin/mst run examples/quickstart/eval.yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetVersionTemplate("mst {{.Version}}\n")
	root.AddCommand(
		newRunCmd(stdio),
		newValidateCmd(stdio),
		newSchemaCmd(stdio),
		newReportCmd(stdio),
		newCollectCmd(stdio),
		newVersionCmd(stdio),
		newClientsCmd(stdio),
		newRunnerCmd(stdio),
	)
	return root
}

func newVersionCmd(stdio Stdio) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mst's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(stdio.Out, "mst %s\n", Version)
			return nil
		},
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
