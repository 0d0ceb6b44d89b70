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
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/plugin"
)

// Version is MST's version, set at build time with
// -ldflags "-X github.com/mst-eval/mst/internal/cli.Version=…".
var Version = "0.1.0-dev"

// ExitCode is mst's exit status. Each value has one meaning, listed by
// ExitCodes; an error gets its code where it is made (withCode), never by
// reading its words.
type ExitCode int

// The exit codes.
const (
	ExitOK          ExitCode = 0
	ExitFailure     ExitCode = 1
	ExitUsage       ExitCode = 2
	ExitPartial     ExitCode = 3
	ExitUnanswered  ExitCode = 4
	ExitGate        ExitCode = 5
	ExitInterrupted ExitCode = 130
)

// Meaning says in words what the code means.
func (c ExitCode) Meaning() string {
	switch c {
	case ExitOK:
		return "the command did its work (for mst run: the run is complete, whatever its pass rate)"
	case ExitFailure:
		return "the command could not do its work"
	case ExitUsage:
		return "bad flags or arguments, or a config or dataset that does not validate"
	case ExitPartial:
		return "the run finished partial: trials are missing (finish it with mst run --resume RUN)"
	case ExitUnanswered:
		return "the run cannot answer: a variant has no graded trial, or more errored or skipped trials than --max-errored allows (the report lists the errors by cause)"
	case ExitGate:
		return "a gate failed: a variant's pass rate is under --min-pass-rate, or it passes significantly less often than in the --baseline run (mst compare: --fail-worse)"
	case ExitInterrupted:
		return "interrupted (Ctrl-C); what finished is kept"
	}
	return "unknown"
}

// ExitCodes lists every exit code in order.
func ExitCodes() []ExitCode {
	return []ExitCode{ExitOK, ExitFailure, ExitUsage, ExitPartial, ExitUnanswered, ExitGate, ExitInterrupted}
}

// exitCodesHelp is the "Exit codes" section of a command's help.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, c := range ExitCodes() {
		fmt.Fprintf(&b, "  %-4d %s\n", int(c), c.Meaning())
	}
	return b.String()
}

// Stdio is the process's standard streams and environment.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
	// Env is the environment, as KEY=value strings.
	Env []string
	// Now is the clock of commands that tell the age of records (mst
	// runs); nil means time.Now. Tests set it.
	Now func() time.Time
	// Parts are the registries of this build, its plugins included; nil
	// means the built-ins and the program plugins on Env's
	// MST_PLUGIN_PATH. Main sets it.
	Parts *builtin.Parts
	// Stopping, when set, is told what to print should the process end
	// before an interrupted command does (Interrupts); nil in tests.
	Stopping *Stopping
}

// parts returns the registries commands use.
func (s Stdio) parts() *builtin.Parts {
	if s.Parts != nil {
		return s.Parts
	}
	return builtin.New(nil, envMap(s.Env)[plugin.SearchPathVar], Version)
}

// now is stdio's clock.
func (s Stdio) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// OSStdio returns the real process stdio.
func OSStdio() Stdio {
	return Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Env: os.Environ()}
}

// exitError carries an exit code to Main.
type exitError struct {
	code ExitCode
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code ExitCode, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// Main runs mst with args and returns the exit code.
func Main(ctx context.Context, args []string, stdio Stdio) int {
	return MainWith(ctx, args, stdio, nil)
}

// MainWith is Main for a build of mst with Go plugins compiled in.
func MainWith(ctx context.Context, args []string, stdio Stdio, plugins []plugin.Plugin) int {
	if stdio.Parts == nil {
		stdio.Parts = builtin.New(plugins, envMap(stdio.Env)[plugin.SearchPathVar], Version)
	}
	defer stdio.Parts.Close()
	ctx = withStoreReports(ctx, stdio.Err)
	root := newRoot(stdio)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return int(ExitOK)
	}
	fmt.Fprintf(stdio.Err, "mst: %s\n", strings.TrimRight(err.Error(), "\n"))
	var ee *exitError
	if errors.As(err, &ee) {
		return int(ee.code)
	}
	return int(ExitFailure)
}

// usageErrors makes every error cobra finds in a command line (an unknown
// command or flag, a wrong number of arguments) exit with ExitUsage: the
// code is set where cobra makes the error.
func usageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return withCode(ExitUsage, renamedFlag(cmd, err)) })
	if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		// A group command runs only to refuse what is not one of its
		// commands, or to show its help. (One with its own RunE, such as
		// mst auth SERVER, checks its own arguments.)
		c.Args = func(cmd *cobra.Command, a []string) error {
			if len(a) > 0 {
				if now, ok := renamedCommands[a[0]]; ok && !cmd.HasParent() {
					return fmt.Errorf("mst %s was renamed: use mst %s (see mst %s --help)", a[0], now, now)
				}
				return fmt.Errorf("unknown command %q for %q; see %s --help", a[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		}
		if c.RunE == nil && c.Run == nil {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error { return withCode(ExitUsage, args(cmd, a)) }
	}
	for _, sub := range c.Commands() {
		usageErrors(sub)
	}
}

// renamedCommands are commands an earlier MST had, with their
// replacement.
var renamedCommands = map[string]string{"env": "runner", "environment": "runner", "envs": "runner"}

// renamedFlags are flags an earlier MST took, with their replacement.
var renamedFlags = map[string]string{
	"env":        "runner",
	"env-option": "runner-option",
	"grade-env":  "grade-runner",
}

// renamedFlag words the error of an unknown flag that an earlier MST took,
// naming its replacement when cmd has it.
func renamedFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	if now, old := renamedFlags[name]; old && cmd.Flags().Lookup(now) != nil {
		return fmt.Errorf("--%s was renamed: use --%s (see %s --help)", name, now, cmd.CommandPath())
	}
	return err
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
		newGradeCmd(stdio),
		newCompareCmd(stdio),
		newShowCmd(stdio),
		newViewCmd(stdio),
		newCollectCmd(stdio),
		newGradeShardCmd(stdio),
		newMCPStdioCmd(stdio),
		newVersionCmd(stdio),
		newClientsCmd(stdio),
		newRunnerCmd(stdio),
		newAuthCmd(stdio),
		newCoordinateCmd(stdio),
		newRunsCmd(stdio),
		newPluginsCmd(stdio),
		newBuildCmd(stdio),
	)
	usageErrors(root)
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

// catalog is what eval configs are checked against: the registries of
// parts, plugins included.
func catalog(parts *builtin.Parts) run.Catalog {
	return run.Catalog{
		Clients: parts.Clients(), Providers: parts.Providers(),
		Graders: parts.Graders(), Sources: parts.Sources(), PluginVersions: parts.PluginVersion,
	}
}
