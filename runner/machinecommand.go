package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/proctree"
)

// MachineCommand is a helper command a runner runs inside its machines, as
// `mst runner NAME ARGS…`. mst offers it as a hidden subcommand of
// `mst runner`, which hands Run every argument after NAME, flags included:
// the command parses its own.
type MachineCommand struct {
	// Name is the subcommand's name.
	Name string
	// Usage is its arguments, as help shows them ("MARKER [--grace D]").
	Usage string
	// Short says in a line what it does.
	Short string
	// Run runs it. ctx ends when mst is interrupted.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// ExecMarkerEnv is the environment variable a channel marks each command
// it runs on a machine with (MST_EXEC=MARKER), so that StopExecCommand can
// find the command's processes there.
const ExecMarkerEnv = "MST_EXEC"

// NewMarker returns a fresh random marker for ExecMarkerEnv.
func NewMarker() string { return RandomHex(12) }

// RandomHex returns n random bytes as hex digits.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// IdleCommand is `mst runner idle [--deadline D]`, the main process of a
// worker or coordinator container: it does nothing until SIGTERM or SIGINT
// arrives, or D has passed when --deadline is given, then exits 0. Workers
// are started beside it; a container started with --rm goes away when it
// exits, so a deadline bounds how long the container can live.
func IdleCommand() MachineCommand {
	return MachineCommand{
		Name:  "idle",
		Usage: "[--deadline D]",
		Short: "Wait for SIGTERM, or until a deadline (the main process of a worker container)",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			fs := flag.NewFlagSet("idle", flag.ContinueOnError)
			fs.SetOutput(stderr)
			deadline := fs.Duration("deadline", 0, "exit after this long (0: wait for a signal only)")
			pos, err := parseInterspersed(fs, args)
			if err != nil {
				return err
			}
			if len(pos) > 0 {
				return fmt.Errorf("idle takes no arguments besides --deadline D, got %q", pos)
			}
			if *deadline < 0 {
				return fmt.Errorf("idle: --deadline %s is negative: give a duration such as 24h", *deadline)
			}
			// A goroutine blocked on a channel alone would be a deadlock
			// to the Go runtime; signal.Notify keeps a watcher running.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			defer signal.Stop(sig)
			var expired <-chan time.Time
			if *deadline > 0 {
				t := time.NewTimer(*deadline)
				defer t.Stop()
				expired = t.C
			}
			select {
			case <-sig:
			case <-ctx.Done():
			case <-expired:
				fmt.Fprintf(stderr, "idle: the deadline of %s has passed\n", *deadline)
			}
			return nil
		},
	}
}

// DefaultExecStopGrace is how long `mst runner stop-exec` gives a command's
// processes between SIGTERM and SIGKILL when --grace is not given.
const DefaultExecStopGrace = 5 * time.Second

// StopExecCommand is `mst runner stop-exec MARKER [--grace D]`: run inside
// a machine, it stops the processes of the command a channel marked with
// MST_EXEC=MARKER: SIGTERM to each, then SIGKILL to those left after D.
// It needs Linux's /proc.
func StopExecCommand() MachineCommand {
	return MachineCommand{
		Name:  "stop-exec",
		Usage: "MARKER [--grace D]",
		Short: "Stop the processes of one command a channel started (run inside a worker machine)",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			fs := flag.NewFlagSet("stop-exec", flag.ContinueOnError)
			fs.SetOutput(stderr)
			grace := fs.Duration("grace", DefaultExecStopGrace, "how long the processes get between SIGTERM and SIGKILL")
			pos, err := parseInterspersed(fs, args)
			if err != nil {
				return err
			}
			if len(pos) != 1 || pos[0] == "" {
				return errors.New("stop-exec: want one MARKER")
			}
			if err := proctree.StopMarked(ctx, ExecMarkerEnv+"="+pos[0], *grace); err != nil {
				return fmt.Errorf("stop-exec: %w", err)
			}
			return nil
		},
	}
}

// StopExecArgv is the command line that runs StopExecCommand with mst at
// mst on a machine.
func StopExecArgv(mst, marker string, grace time.Duration) []string {
	return []string{mst, "runner", "stop-exec", "--grace", grace.String(), marker}
}

// parseInterspersed parses args with fs, flags before, between and after
// the positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// ImageRepository is the repository of the worker image `mst runner setup
// docker` builds; its tag is the MST version. The docker and kubernetes
// runners both run it by default.
const ImageRepository = "mst-worker"

// WorkerImage is the reference of the default worker image for an MST
// version: mst-worker:<version>, with characters a tag cannot hold
// replaced by '-'.
func WorkerImage(version string) string {
	return ImageRepository + ":" + imageTag(version)
}

var notTagChar = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func imageTag(version string) string {
	t := notTagChar.ReplaceAllString(version, "-")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	return t[:min(len(t), 128)]
}
