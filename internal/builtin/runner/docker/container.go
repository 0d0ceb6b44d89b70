package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/runner"
)

// containerSpec says which container to create for a shard.
type containerSpec struct {
	run     string
	shard   int
	attempt int
	// grade is set for a shard that grades: its container's name says so.
	grade bool
	// mounts are host paths bind-mounted read-only at the same path.
	mounts []string
}

var notNameChar = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// containerName is mst-<run>-<shard>, with an attempt suffix on resumed
// runs and -grade for a shard that grades, and any character Docker
// refuses in a name replaced by '-'.
func containerName(spec containerSpec) string {
	name := fmt.Sprintf("mst-%s-%d", spec.run, spec.shard)
	if spec.attempt > 1 {
		name += "-a" + strconv.Itoa(spec.attempt)
	}
	if spec.grade {
		name += "-grade"
	}
	return notNameChar.ReplaceAllString(name, "-")
}

// create starts the shard's container and checks that mst runs in it;
// for a desktop image, it waits first until the container's desktop is up.
func (r *dockerRunner) create(ctx context.Context, spec containerSpec) (runner.Machine, error) {
	name := containerName(spec)
	var desktop []string
	if r.img.desktop {
		var err error
		if desktop, err = r.desktopArgs(spec.shard); err != nil {
			return nil, err
		}
	}
	args := func(name string) []string {
		// The worker's tokens folder; in a desktop image the worker runs
		// as the desktop user, who must own it.
		runMST := "/run/mst:rw,mode=0700"
		if r.img.desktop {
			runMST += ",uid=" + desktopUID + ",gid=" + desktopUID
		}
		a := []string{"run", "--detach", "--name", name,
			"--label", LabelRun + "=" + spec.run,
			"--label", LabelShard + "=" + strconv.Itoa(spec.shard),
			"--label", LabelVersion + "=" + r.version,
			"--security-opt", "no-new-privileges",
			"--tmpfs", runMST,
			"--tmpfs", "/tmp:rw,mode=1777",
			// A worker whose client's program is missing says how to get
			// it into the image.
			"--env", clientSetupEnv + "=" + clientSetup,
			// The worker's hello says which image it runs in.
			"--env", imageDigestEnv + "=" + r.img.String(),
		}
		a = append(a, desktop...)
		if r.set.network != "" {
			a = append(a, "--network", r.set.network)
		}
		for _, m := range spec.mounts {
			a = append(a, "--mount", "type=bind,source="+m+",target="+m+",readonly")
		}
		// The container ends by itself at the machine's deadline, so one
		// a dead coordinator left goes away. A desktop image's session
		// script starts the desktop first, then runs the same command.
		idle := []string{"runner", "idle", "--deadline", r.params.MachineDeadline().String()}
		if r.img.desktop {
			return append(append(a, "--entrypoint", desktopSession, r.img.id, r.set.mst), idle...)
		}
		return append(append(a, "--entrypoint", r.set.mst, r.img.id), idle...)
	}
	_, err := r.cli.Run(ctx, nil, args(name)...)
	if err != nil && says(err, "already in use") {
		// A container of an earlier attempt that was kept holds the
		// name; the labels, not the name, tie a container to its run.
		name += "-" + runner.RandomHex(3)
		_, err = r.cli.Run(ctx, nil, args(name)...)
	}
	c := &container{cli: r.cli, name: name, img: r.img, mst: r.set.mst, workDir: r.set.workDir, grace: r.params.Grace(), logger: r.logger}
	if err != nil {
		c.Remove(context.WithoutCancel(ctx))
		if says(err, "no such file") || says(err, "not found") {
			return nil, fmt.Errorf("starting a container of %s: the image has no mst at %s (%w). %s", r.img.ref, r.set.mst, err, noMSTHelp(r.set.mst, r.version, r.arch))
		}
		return nil, fmt.Errorf("starting a container of %s: %w", r.img.ref, err)
	}
	if r.img.desktop {
		if err := r.waitDesktop(ctx, name); err != nil {
			c.Remove(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("starting a container of %s: %w", r.img.ref, err)
		}
	}
	// The worker's hello would catch another version too, but only after
	// the bundle is copied; this says at once what is wrong with the image.
	out, err := r.cli.Run(ctx, nil, "exec", name, r.set.mst, "version")
	if err != nil {
		err = fmt.Errorf("%w. %s", err, noMSTHelp(r.set.mst, r.version, r.arch))
	} else if found, ok := strings.CutPrefix(out, "mst "); !ok {
		err = fmt.Errorf("%s is not mst: `%s version` printed %q. %s", r.set.mst, r.set.mst, out, noMSTHelp(r.set.mst, r.version, r.arch))
	} else if r.version != "" && found != r.version {
		err = errors.New(mismatch(r.img.ref, r.set.mst, found, r.version, r.arch))
	}
	if err != nil {
		c.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("checking mst in the container of %s: %w", r.img.ref, err)
	}
	return c, nil
}

// imageDigestEnv is the variable that tells a worker the image its
// container runs, pinned by digest (shard.ImageDigestEnv, which a runner
// cannot import); its hello carries it into run.json.
const imageDigestEnv = "MST_IMAGE_DIGEST"

// container is one shard's machine: a running container.
type container struct {
	cli     *clicmd.CLI
	name    string
	img     image
	mst     string
	workDir string
	// grace is how long the command's processes get between SIGTERM and
	// SIGKILL when Exec's context ends.
	grace  time.Duration
	logger *slog.Logger
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

func removeContainer(ctx context.Context, c *clicmd.CLI, name string) error {
	_, err := c.Run(ctx, nil, "rm", "--force", "--volumes", name)
	if err != nil && says(err, "No such container") {
		return nil
	}
	return err
}

// Exec runs argv in the container with docker exec -i. When ctx ends, the
// command's stdin is closed and its processes in the container are sent
// SIGTERM, then SIGKILL after the runner's stop grace (killing the docker
// CLI alone would leave them running); the CLI itself is killed if it has
// not ended a few seconds later. A non-zero exit comes back as an
// *exec.ExitError, whose ExitCode is the command's.
func (c *container) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec in %s: no command", c.name)
	}
	marker := runner.NewMarker()
	args := []string{"exec", "--interactive", "--env", runner.ExecMarkerEnv + "=" + marker}
	// The cloud chains' variables set here reach the worker, which may
	// write into the run's bucket: by name only, so the docker CLI passes
	// each value on from its own environment and no argv holds one.
	for _, name := range runner.SetCloudChainVars() {
		args = append(args, "--env", name)
	}
	args = append(append(args, c.name), argv...)
	stop := clicmd.Stop{Grace: c.grace, Remote: func(ctx context.Context) error { return c.stopExec(ctx, marker) }}
	if err := c.cli.Exec(ctx, args, stdin, stdout, stderr, stop); err != nil {
		return fmt.Errorf("%s in %s: %w", argv[0], c.name, err)
	}
	return nil
}

// stopExec stops the processes of the command marked with marker, through
// mst's hidden `runner stop-exec` in the container.
func (c *container) stopExec(ctx context.Context, marker string) error {
	args := append([]string{"exec", c.name}, runner.StopExecArgv(c.mst, marker, c.grace)...)
	_, err := c.cli.Run(ctx, nil, args...)
	if err != nil {
		c.logger.Debug("stopping a command in the container failed; it ends with the container", "container", c.name, "err", err)
	}
	return err
}

// CopyTo copies the local folder localDir to remoteDir in the container:
// remoteDir ends up holding localDir's contents, and the folders above it
// are made when missing. remoteDir must be absolute.
func (c *container) CopyTo(ctx context.Context, localDir, remoteDir string) error {
	if !path.IsAbs(remoteDir) {
		return fmt.Errorf("copying %s to %s: %s is not an absolute path", localDir, c.name, remoteDir)
	}
	write := func(w io.Writer) error {
		return runner.WriteTar(w, localDir, strings.TrimPrefix(path.Clean(remoteDir), "/"))
	}
	// docker cp - extracts a tar read from stdin into a folder that must
	// exist: the root, with the entries named from it.
	if err := c.cli.RunWriting(ctx, write, "cp", "-", c.name+":/"); err != nil {
		return fmt.Errorf("copying %s to %s:%s: %w", localDir, c.name, remoteDir, err)
	}
	return nil
}

// CopyFrom copies the file or folder remotePath in the container to
// localPath, making the folders above it. Each file is written under a
// temporary name and renamed, so a reader never sees half of one.
func (c *container) CopyFrom(ctx context.Context, remotePath, localPath string) error {
	read := func(r io.Reader) error { return runner.ReadTar(r, localPath) }
	if err := c.cli.RunReading(ctx, read, "cp", c.name+":"+remotePath, "-"); err != nil {
		return fmt.Errorf("copying %s:%s to %s: %w", c.name, remotePath, localPath, err)
	}
	return nil
}
