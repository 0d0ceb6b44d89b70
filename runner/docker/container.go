package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/runner"
)

// containerSpec says which container to create for a shard.
type containerSpec struct {
	run     string
	shard   int
	attempt int
	// mounts are host paths bind-mounted read-only at the same path.
	mounts []string
}

// ExecMarkerEnv is the environment variable Exec marks each command with,
// so StopExec can find its processes.
const ExecMarkerEnv = "MST_EXEC"

// ExecStopGrace is how long a command stopped by its context gets between
// SIGTERM and SIGKILL.
const ExecStopGrace = 5 * time.Second

var notNameChar = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// containerName is mst-<run>-<shard>, with an attempt suffix on resumed
// runs, and any character Docker refuses in a name replaced by '-'.
func containerName(spec containerSpec) string {
	name := fmt.Sprintf("mst-%s-%d", spec.run, spec.shard)
	if spec.attempt > 1 {
		name += "-a" + strconv.Itoa(spec.attempt)
	}
	return notNameChar.ReplaceAllString(name, "-")
}

// create starts the shard's container and checks that mst runs in it.
func (r *dockerRunner) create(ctx context.Context, spec containerSpec) (runner.Machine, error) {
	name := containerName(spec)
	args := func(name string) []string {
		a := []string{"run", "--detach", "--name", name,
			"--label", LabelRun + "=" + spec.run,
			"--label", LabelShard + "=" + strconv.Itoa(spec.shard),
			"--label", LabelVersion + "=" + r.version,
			"--security-opt", "no-new-privileges",
			"--tmpfs", "/run/mst:rw,mode=0700",
			"--tmpfs", "/tmp:rw,mode=1777",
		}
		if r.set.network != "" {
			a = append(a, "--network", r.set.network)
		}
		for _, m := range spec.mounts {
			a = append(a, "--mount", "type=bind,source="+m+",target="+m+",readonly")
		}
		return append(a, "--entrypoint", r.set.mst, r.img.id, "runner", "idle")
	}
	_, err := r.cli.run(ctx, nil, args(name)...)
	if err != nil && says(err, "already in use") {
		// A container of an earlier attempt that was kept holds the
		// name; the labels, not the name, tie a container to its run.
		name += "-" + randomHex(3)
		_, err = r.cli.run(ctx, nil, args(name)...)
	}
	c := &container{cli: r.cli, name: name, img: r.img, mst: r.set.mst, workDir: r.set.workDir, logger: r.logger}
	if err != nil {
		c.Remove(context.WithoutCancel(ctx))
		if says(err, "no such file") || says(err, "not found") {
			return nil, fmt.Errorf("starting a container of %s: the image has no mst at %s (set --runner-option mst=PATH): %w", r.img.ref, r.set.mst, err)
		}
		return nil, fmt.Errorf("starting a container of %s: %w", r.img.ref, err)
	}
	// The worker's hello would catch another version too, but only after
	// the bundle is copied; this says at once what is wrong with the image.
	out, err := r.cli.run(ctx, nil, "exec", name, r.set.mst, "version")
	if err == nil && r.version != "" && out != "mst "+r.version {
		err = fmt.Errorf("the image's mst says %q, and this coordinator is mst %s: rebuild the image (mst runner setup docker) or put mst %s in it", out, r.version, r.version)
	}
	if err != nil {
		c.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("checking mst in the container of %s: %w", r.img.ref, err)
	}
	return c, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// container is one shard's machine: a running container.
type container struct {
	cli     *cli
	name    string
	img     image
	mst     string
	workDir string
	logger  *slog.Logger
}

func (c *container) ID() string      { return c.name }
func (c *container) WorkDir() string { return c.workDir }
func (c *container) MST() []string   { return []string{c.mst} }
func (c *container) Image() string   { return c.img.String() }

// Remove deletes the container, running or not. A container that is
// already gone is not an error.
func (c *container) Remove(ctx context.Context) error {
	return removeContainer(ctx, c.cli, c.name)
}

func removeContainer(ctx context.Context, c *cli, name string) error {
	_, err := c.run(ctx, nil, "rm", "--force", "--volumes", name)
	if err != nil && says(err, "No such container") {
		return nil
	}
	return err
}

// Exec runs argv in the container with docker exec -i. When ctx ends, the
// command's processes in the container are sent SIGTERM, then SIGKILL after
// ExecStopGrace (killing the docker CLI alone would leave them running),
// and the CLI itself is killed if it has not ended a few seconds later. A
// non-zero exit comes back as an *exec.ExitError, whose ExitCode is the
// command's.
func (c *container) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec in %s: no command", c.name)
	}
	marker := randomHex(12)
	args := append([]string{"exec", "--interactive", "--env", ExecMarkerEnv + "=" + marker, c.name}, argv...)
	cmd := exec.CommandContext(ctx, c.cli.bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	isolate(cmd)
	// Stdin is copied by a goroutine of Exec's own, which Exec does not
	// wait for: with cmd.Stdin, Wait would wait for its copy, and a read
	// from a pipe the caller keeps open (a worker's protocol stream) would
	// hold Exec long after the command died with its container. The pipe
	// closes when Wait sees the CLI exit; the goroutine ends at its next
	// write, or when the caller closes stdin.
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	// Wait returns only after Cancel, if it was called, has returned, so
	// the Add happens before stopping.Wait below.
	var stopping sync.WaitGroup
	cmd.Cancel = func() error {
		stopping.Go(func() { c.stopExec(ctx, marker) })
		return nil
	}
	// After the context ends, the CLI gets the grace period and a little
	// more to see its command end; then it is killed.
	cmd.WaitDelay = ExecStopGrace + 5*time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s in %s: %w", argv[0], c.name, err)
	}
	go func() {
		if stdin != nil {
			io.Copy(pipe, stdin)
		}
		pipe.Close()
	}()
	err = cmd.Wait()
	stopping.Wait()
	if ctx.Err() != nil {
		if err == nil {
			err = ctx.Err()
		}
		return fmt.Errorf("%s in %s stopped: %w", argv[0], c.name, err)
	}
	if err != nil {
		return fmt.Errorf("%s in %s: %w", argv[0], c.name, err)
	}
	return nil
}

// stopExec stops the processes of the command marked with marker, through
// mst's hidden `runner stop-exec` in the container.
func (c *container) stopExec(ctx context.Context, marker string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ExecStopGrace+15*time.Second)
	defer cancel()
	grace := ExecStopGrace.String()
	if _, err := c.cli.run(sctx, nil, "exec", c.name, c.mst, "runner", "stop-exec", "--grace", grace, marker); err != nil {
		c.logger.Debug("stopping a command in the container failed; it ends with the container", "container", c.name, "err", err)
	}
}

// CopyTo copies the local folder localDir to remoteDir in the container:
// remoteDir ends up holding localDir's contents, and the folders above it
// are made when missing. remoteDir must be absolute.
func (c *container) CopyTo(ctx context.Context, localDir, remoteDir string) error {
	if !path.IsAbs(remoteDir) {
		return fmt.Errorf("copying %s to %s: %s is not an absolute path", localDir, c.name, remoteDir)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(runner.WriteTar(pw, localDir, strings.TrimPrefix(path.Clean(remoteDir), "/")))
	}()
	// docker cp - extracts a tar read from stdin into a folder that must
	// exist: the root, with the entries named from it.
	_, err := c.cli.run(ctx, pr, "cp", "-", c.name+":/")
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return fmt.Errorf("copying %s to %s:%s: %w", localDir, c.name, remoteDir, err)
	}
	return nil
}

// CopyFrom copies the file or folder remotePath in the container to
// localPath, making the folders above it. Each file is written under a
// temporary name and renamed, so a reader never sees half of one.
func (c *container) CopyFrom(ctx context.Context, remotePath, localPath string) error {
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, c.cli.bin, "cp", c.name+":"+remotePath, "-")
	cmd.Stderr = &stderr
	isolate(cmd)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("copying %s:%s: %w", c.name, remotePath, err)
	}
	terr := runner.ReadTar(out, localPath)
	if terr != nil {
		// Drain, so the CLI can end.
		io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	if werr != nil {
		return fmt.Errorf("copying %s:%s: %w", c.name, remotePath, &cmdError{args: []string{"cp"}, stderr: stderr.String(), err: werr})
	}
	if terr != nil {
		return fmt.Errorf("copying %s:%s to %s: %w", c.name, remotePath, localPath, terr)
	}
	return nil
}
