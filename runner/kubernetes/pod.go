package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/runner"
)

// ExecMarkerEnv is the environment variable Exec marks each command with
// when the env option is set, so `mst runner stop-exec` can find its
// processes. It is the docker runner's.
const ExecMarkerEnv = "MST_EXEC"

// ExecStopGrace is how long a command stopped by its context gets between
// SIGTERM and SIGKILL.
const ExecStopGrace = 5 * time.Second

// create makes the shard's pod, waits for it to be Ready and checks that
// the mst in it is the coordinator's version.
func (r *kubeRunner) create(ctx context.Context, spec podSpec) (runner.Machine, error) {
	k := r.kubectl
	name := podName(spec)
	_, err := k.run(ctx, bytes.NewReader(podManifest(name, spec, r.set, r.image, r.version)), k.createArgs()...)
	if err != nil && says(err, "AlreadyExists") {
		// A pod of an earlier attempt that was kept holds the name; the
		// labels, not the name, tie a pod to its run.
		spec.suffix = randomHex(3)
		name = podName(spec)
		_, err = k.run(ctx, bytes.NewReader(podManifest(name, spec, r.set, r.image, r.version)), k.createArgs()...)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the pod %s in the namespace %s: %w", name, r.set.namespace, err)
	}
	p := &pod{kubectl: k, name: name, image: r.image, set: r.set, logger: r.logger}
	if _, err := k.run(ctx, nil, k.waitArgs(name, r.set.podTimeout)...); err != nil {
		p.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("the pod %s of %s was not Ready within %s (raise --runner-option podTimeout, or see why with kubectl describe pod -n %s %s and keep=failed): %w",
			name, r.image, r.set.podTimeout, r.set.namespace, name, err)
	}
	// The worker's hello would catch another version too, but only after
	// the bundle is copied; this says at once what is wrong with the image.
	out, err := k.run(ctx, nil, k.execArgs(name, false, r.set.mst, "version")...)
	if err == nil && r.version != "" && out != "mst "+r.version {
		err = fmt.Errorf("the image's mst says %q, and this coordinator is mst %s: put mst %s in the image (mst runner setup docker builds one) and name it with --runner-option image=REF", out, r.version, r.version)
	}
	if err != nil {
		p.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("checking mst in the pod %s of %s (is it at %s? set --runner-option mst=PATH): %w", name, r.image, r.set.mst, err)
	}
	return p, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// pod is one shard's machine: a running pod.
type pod struct {
	kubectl *kubectl
	name    string
	image   string
	set     settings
	logger  *slog.Logger
}

func (p *pod) ID() string      { return p.set.namespace + "/" + p.name }
func (p *pod) WorkDir() string { return p.set.workDir }
func (p *pod) MST() []string   { return []string{p.set.mst} }
func (p *pod) Image() string   { return p.image }

// Remove deletes the pod without waiting for it to end. A pod that is gone
// already is not an error.
func (p *pod) Remove(ctx context.Context) error {
	if _, err := p.kubectl.run(ctx, nil, p.kubectl.deleteArgs(p.name)...); err != nil {
		return fmt.Errorf("deleting the pod %s: %w", p.ID(), err)
	}
	return nil
}

// commandArgv is what Exec runs in the pod for argv: argv itself, or,
// with the env option, argv under env with the marker set.
func commandArgv(set settings, marker string, argv []string) []string {
	if set.env == "" {
		return argv
	}
	return append([]string{set.env, ExecMarkerEnv + "=" + marker}, argv...)
}

// Exec runs argv in the pod with kubectl exec --stdin. When ctx ends and
// the env option is set, the command's processes in the pod are sent
// SIGTERM, then SIGKILL after ExecStopGrace; without it, only kubectl is
// stopped, and the command ends when it reads the end of its stdin or
// with the pod. A non-zero exit comes back as an *exec.ExitError, whose
// ExitCode is the command's (kubectl exits with it).
func (p *pod) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec in %s: no command", p.ID())
	}
	marker := randomHex(12)
	cmd := exec.CommandContext(ctx, p.kubectl.bin, p.kubectl.execArgs(p.name, true, commandArgv(p.set, marker, argv)...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	isolate(cmd)
	// Stdin is copied by a goroutine Exec does not wait for, so that a
	// caller who keeps stdin open (a worker's protocol stream) does not
	// hold Exec after the command has ended.
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stopping sync.WaitGroup
	cmd.Cancel = func() error {
		// Closing stdin first lets a command that reads it (the worker)
		// end by itself.
		pipe.Close()
		if p.set.env != "" {
			stopping.Go(func() { p.stopExec(ctx, marker) })
			return nil
		}
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = ExecStopGrace + 5*time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s in %s: %w", argv[0], p.ID(), err)
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
		return fmt.Errorf("%s in %s stopped: %w", argv[0], p.ID(), err)
	}
	if err != nil {
		return fmt.Errorf("%s in %s: %w", argv[0], p.ID(), err)
	}
	return nil
}

// stopExec stops the processes of the command marked with marker, through
// mst's hidden `runner stop-exec` in the pod.
func (p *pod) stopExec(ctx context.Context, marker string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ExecStopGrace+15*time.Second)
	defer cancel()
	argv := []string{p.set.mst, "runner", "stop-exec", "--grace", ExecStopGrace.String(), marker}
	if _, err := p.kubectl.run(sctx, nil, p.kubectl.execArgs(p.name, false, argv...)...); err != nil {
		p.logger.Debug("stopping a command in the pod failed; it ends with the pod", "pod", p.ID(), "err", err)
	}
}

// untarArgv extracts a tar stream from stdin at the pod's root.
func untarArgv(set settings) []string {
	return []string{set.tar, "-x", "-f", "-", "-C", "/"}
}

// tarArgv writes remotePath (a file or a folder with its contents) to
// stdout as a tar stream whose first entry is its last element.
func tarArgv(set settings, remotePath string) []string {
	dir, base := path.Split(path.Clean(remotePath))
	if dir == "" {
		dir = "/"
	}
	return []string{set.tar, "-c", "-f", "-", "-C", dir, base}
}

// CopyTo copies the local folder localDir to remoteDir in the pod: tar in
// the pod extracts, at its root, a stream whose entries are named from the
// root, so remoteDir ends up holding localDir's contents and the folders
// above it are made when missing. remoteDir must be absolute.
func (p *pod) CopyTo(ctx context.Context, localDir, remoteDir string) error {
	if !path.IsAbs(remoteDir) {
		return fmt.Errorf("copying %s to %s: %s is not an absolute path", localDir, p.ID(), remoteDir)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(runner.WriteTar(pw, localDir, strings.TrimPrefix(path.Clean(remoteDir), "/")))
	}()
	_, err := p.kubectl.run(ctx, pr, p.kubectl.execArgs(p.name, true, untarArgv(p.set)...)...)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return fmt.Errorf("copying %s to %s:%s (the image needs tar at %q, or set --runner-option tar=PATH): %w", localDir, p.ID(), remoteDir, p.set.tar, err)
	}
	return nil
}

// CopyFrom copies the file or folder remotePath in the pod to localPath,
// making the folders above it. Each file is written under a temporary name
// and renamed, so a reader never sees half of one.
func (p *pod) CopyFrom(ctx context.Context, remotePath, localPath string) error {
	var stderr strings.Builder
	args := p.kubectl.execArgs(p.name, false, tarArgv(p.set, remotePath)...)
	cmd := exec.CommandContext(ctx, p.kubectl.bin, args...)
	cmd.Stderr = &stderr
	isolate(cmd)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("copying %s:%s: %w", p.ID(), remotePath, err)
	}
	terr := runner.ReadTar(out, localPath)
	if terr != nil {
		// Drain, so kubectl can end.
		io.Copy(io.Discard, out)
	}
	if werr := cmd.Wait(); werr != nil {
		return fmt.Errorf("copying %s:%s: %w", p.ID(), remotePath, &cmdError{args: shortArgs(args), stderr: stderr.String(), err: werr})
	}
	if terr != nil {
		return fmt.Errorf("copying %s:%s to %s: %w", p.ID(), remotePath, localPath, terr)
	}
	return nil
}
