package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/engine/detach"
	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
)

// maxCoordinateInput bounds the JSON line mst coordinate reads.
const maxCoordinateInput = 4 << 20

// secretsName is the secrets file's name in the coordinator's private
// memory-backed folder.
const secretsName = "secrets.env"

// newCoordinateCmd is the start of a detached run's coordinator: the
// launching mst runs it over the coordinator machine's channel.
func newCoordinateCmd(stdio Stdio) *cobra.Command {
	var bundle, secretsDir string
	var serve bool
	cmd := &cobra.Command{
		Use:   "coordinate --bundle DIR",
		Short: "Start a detached run's coordinator on this machine (mst run --detach runs it, not people)",
		Long: `Start the coordinator of a detached run from the bundle in DIR (detach.json, the
eval config, datasets.json), in a session of its own, and return once it has
written its first status to the result store.

It reads one JSON line on stdin: {"secretsFile": "…"}, the secrets file's
content, which it keeps in a private folder in memory-backed storage
(/dev/shm) for the run's commands, and deletes when the run ends.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if serve {
				return serveCoordinator(cmd.Context(), stdio.parts().ResultStores(), bundle, secretsDir)
			}
			return startCoordinator(cmd.Context(), stdio, bundle)
		},
	}
	cmd.Flags().StringVar(&bundle, "bundle", "", "the coordinator bundle's folder")
	cmd.Flags().BoolVar(&serve, "serve", false, "be the coordinator (started by mst coordinate itself)")
	cmd.Flags().StringVar(&secretsDir, "secrets-dir", "", "the private folder of the secrets file")
	cmd.Flags().MarkHidden("serve")
	cmd.Flags().MarkHidden("secrets-dir")
	cmd.MarkFlagRequired("bundle")
	return cmd
}

// startCoordinator keeps the secrets, starts the coordinator in a session
// of its own and waits until it says it has started (or has died).
func startCoordinator(ctx context.Context, stdio Stdio, bundle string) error {
	bundle, err := filepath.Abs(bundle)
	if err != nil {
		return err
	}
	spec, err := detach.ReadSpec(bundle)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	line, err := bufio.NewReaderSize(io.LimitReader(stdio.In, maxCoordinateInput), 64<<10).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mst coordinate: reading stdin: %w", err)
	}
	var in coordinateInput
	if len(strings.TrimSpace(string(line))) > 0 {
		if err := json.Unmarshal(line, &in); err != nil {
			return withCode(ExitUsage, fmt.Errorf("mst coordinate: stdin holds no JSON line {\"secretsFile\": …}: %v", err))
		}
	}
	secretsDir := ""
	if in.SecretsFile != "" {
		if secretsDir, err = privateSecrets(spec.ID, in.SecretsFile, spec.Secrets); err != nil {
			return err
		}
	}
	cleanup := func() {
		if secretsDir != "" {
			os.RemoveAll(secretsDir)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		cleanup()
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(bundle, detach.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		cleanup()
		return err
	}
	defer logFile.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		cleanup()
		return err
	}
	argv := []string{"coordinate", "--serve", "--bundle", bundle}
	if secretsDir != "" {
		argv = append(argv, "--secrets-dir", secretsDir)
	}
	child := exec.Command(exe, argv...)
	child.Args[0] = "mst"
	child.Dir = bundle
	// The channel's marker of this command (docker's MST_EXEC) stays
	// behind: stopping this command must not stop the coordinator.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MST_EXEC=") {
			child.Env = append(child.Env, kv)
		}
	}
	child.Stdout, child.Stderr = logFile, logFile
	child.ExtraFiles = []*os.File{readyW}
	// A session of its own: the coordinator outlives this command, the
	// channel that started it, and a hang-up of its terminal.
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		readyW.Close()
		cleanup()
		return fmt.Errorf("mst coordinate: starting the coordinator: %w", err)
	}
	readyW.Close()
	said, _ := io.ReadAll(io.LimitReader(ready, 64))
	ready.Close()
	if strings.TrimSpace(string(said)) == "started" {
		child.Process.Release()
		fmt.Fprintf(stdio.Out, "coordinator of %s started (process %d)\n", spec.ID, child.Process.Pid)
		return nil
	}
	// It ended before it could write its first status: say why.
	child.Wait()
	cleanup()
	tail, _ := os.ReadFile(filepath.Join(bundle, detach.LogFile))
	return fmt.Errorf("mst coordinate: the coordinator of %s ended before it started:\n%s", spec.ID, lastLines(string(tail), 15))
}

// privateSecrets writes the secrets file's content to a new private
// folder in memory-backed storage and returns the folder.
func privateSecrets(id, content string, names []string) (string, error) {
	set, err := secrets.Parse("the secrets sent to mst coordinate", strings.NewReader(content))
	if err != nil {
		return "", withCode(ExitUsage, err)
	}
	for _, n := range names {
		if _, ok := set.Get(n); !ok {
			return "", withCode(ExitUsage, fmt.Errorf("mst coordinate: the secrets on stdin lack %s, which the launching machine's secrets file set: launch the run again", n))
		}
	}
	root := "/dev/shm"
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return "", fmt.Errorf("mst coordinate: this machine has no memory-backed /dev/shm, where the coordinator keeps the secrets file's values so they never reach a disk: give the coordinator machine one")
	}
	dir, err := os.MkdirTemp(root, "mst-secrets-")
	if err != nil {
		return "", fmt.Errorf("mst coordinate: %w", err)
	}
	// Marked, so that once its coordinator is gone however it went, the
	// next mst run (or mst runner cleanup) removes it.
	if err := os.Chmod(dir, 0o700); err != nil || proctree.MarkOwner(dir, id) != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("mst coordinate: cannot make the private folder %s", dir)
	}
	if err := os.WriteFile(filepath.Join(dir, secretsName), []byte(content), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("mst coordinate: %w", err)
	}
	return dir, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// serveCoordinator is the coordinator itself, in its own session: its
// stdout and stderr are the bundle's log.txt, and file 3 is the pipe on
// which it says it has started.
func serveCoordinator(ctx context.Context, reg *store.Registry, bundle, secretsDir string) error {
	ready := os.NewFile(3, "ready")
	say := func(msg string) {
		if ready != nil {
			fmt.Fprintln(ready, msg)
			ready.Close()
			ready = nil
		}
	}
	defer say("failed")
	defer func() {
		if secretsDir != "" {
			os.RemoveAll(secretsDir)
		}
	}()
	// A hang-up is not a stop: the coordinator outlives the channel.
	signal.Ignore(syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.WithoutCancel(ctx), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec, err := detach.ReadSpec(bundle)
	if err != nil {
		return err
	}
	// The machine's finish command runs last, however the coordinator
	// ends: after its secrets are gone (deferred later, so run first).
	defer finish(spec)
	defer func() {
		if secretsDir != "" {
			os.RemoveAll(secretsDir)
		}
	}()
	st, err := resultsStore(ctx, reg, spec.Results, spec.Eval)
	if err != nil {
		return err
	}
	records, ok := st.(store.DetachedRecords)
	if !ok {
		return fmt.Errorf("%s keeps no detached runs: a detached run's results are in a bucket", st.Location())
	}
	c := &detach.Coordinator{
		Spec: spec, Dir: bundle, Records: detach.NewRecords(records, spec.Eval),
		Env: os.Environ(), Log: os.Stdout, LogPath: filepath.Join(bundle, detach.LogFile),
	}
	for _, dir := range []string{spec.WorkDir, secretsDir} {
		if dir != "" {
			c.RunFiles = append(c.RunFiles, filepath.Join(dir, runner.CoordinatorRunFile))
		}
	}
	if secretsDir != "" {
		c.SecretsFile = filepath.Join(secretsDir, secretsName)
		set, err := secrets.Load(c.SecretsFile)
		if err != nil {
			return err
		}
		set.Withhold(credstore.KeySecret) // mst run reads it from the file; nothing it starts gets it
		for k, v := range set.Env() {
			c.SecretsEnv = append(c.SecretsEnv, k+"="+v)
		}
	}
	// A work folder marked with an owner (a processes runner's folder),
	// and the private secrets folder, are this process's now, not the
	// launching one's, which ends: a sweep leaves them while it runs.
	for _, dir := range []string{spec.WorkDir, secretsDir} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, proctree.OwnerFile)); err == nil {
			if err := proctree.MarkOwner(dir, spec.ID); err != nil {
				return err
			}
		}
	}
	// Where a runner's watchdog looks for the process it stops at the
	// machine's deadline.
	if spec.WorkDir != "" {
		if err := atomicfile.WriteFrom(filepath.Join(spec.WorkDir, runner.CoordinatorPIDFile), strings.NewReader(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
			return err
		}
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("writing the first status: %w", err)
	}
	say("started")
	return c.Run(ctx)
}

// finish runs the coordinator machine's finish command (which may end
// this very process, as it removes the machine).
func finish(spec *detach.Spec) {
	if len(spec.Finish) == 0 {
		return
	}
	fmt.Fprintf(os.Stdout, "%s mst coordinate: finishing: %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(spec.Finish, " "))
	fin := exec.Command(spec.Finish[0], spec.Finish[1:]...)
	fin.Env = append(os.Environ(), spec.Env...)
	fin.Stdout, fin.Stderr = os.Stdout, os.Stdout
	fin.Dir = "/"
	if err := fin.Run(); err != nil {
		fmt.Fprintf(os.Stdout, "mst coordinate: the finish command failed: %v\n", err)
	}
}
