package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/runner"
)

// create makes the shard's pod, waits for it to be Ready and checks that
// the mst in it is the coordinator's version.
func (r *kubeRunner) create(ctx context.Context, spec podSpec) (runner.Machine, error) {
	k := r.kubectl
	name := podName(spec)
	_, err := k.run(ctx, bytes.NewReader(podManifest(name, spec, r.set, r.image, r.version)), k.createArgs()...)
	if err != nil && says(err, "AlreadyExists") {
		// A pod of an earlier attempt that was kept holds the name; the
		// labels, not the name, tie a pod to its run.
		spec.suffix = runner.RandomHex(3)
		name = podName(spec)
		_, err = k.run(ctx, bytes.NewReader(podManifest(name, spec, r.set, r.image, r.version)), k.createArgs()...)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the pod %s in the namespace %s: %w", name, r.set.namespace, err)
	}
	p := &pod{kubectl: k, name: name, image: r.image, set: r.set, grace: r.params.Grace(), logger: r.logger}
	ready, err := k.run(ctx, nil, k.waitArgs(name, r.set.podTimeout)...)
	if err != nil {
		p.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("the pod %s of %s was not Ready within %s (raise --runner-option podTimeout, or see why with kubectl describe pod -n %s %s and keep=failed): %w",
			name, r.image, r.set.podTimeout, r.set.namespace, name, err)
	}
	p.image = pinImage(ready, r.image, func(msg string, args ...any) {
		// Said once a run: every pod runs the same image.
		r.noDigest.Do(func() { r.logger.Info(msg, args...) })
	})
	// The worker's hello would catch another version too, but only after
	// the bundle is copied; this says at once what is wrong with the image.
	if err := checkImage(ctx, k, name, r.image, r.set, r.version); err != nil {
		p.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("checking the image in the pod %s: %w", name, err)
	}
	return p, nil
}

// pinImage is the image, pinned by digest, that run.json records for a
// pod of the image ref, from the pod's JSON once it is Ready (out). When
// the cluster reported no digest, it is ref, and say is told why.
func pinImage(out, ref string, say func(msg string, args ...any)) string {
	digest, imageID, err := containerDigest([]byte(out), ContainerName)
	switch {
	case err != nil:
		say("the pod's status could not be read for its image's digest; run.json records the image as named", "image", ref, "err", err)
	case digest == "" && imageID == "":
		say("the cluster reported no digest of the pods' image (their status has no imageID, as on a cluster without real kubelets); run.json records the image as named", "image", ref)
	case digest == "":
		say("the cluster reported an imageID that holds no digest; run.json records the image as named", "image", ref, "imageID", imageID)
	}
	return pinnedImage(ref, digest)
}

// checkImage checks, at once, what the runner needs in the image of the
// pod name: mst of the coordinator's version (checkMST) and tar
// (checkTar).
func checkImage(ctx context.Context, k *kubectl, name, image string, set settings, version string) error {
	tarErr := make(chan error, 1)
	go func() { tarErr <- checkTar(ctx, k, name, image, set) }()
	mstErr := checkMST(ctx, k, name, image, set.mst, version)
	if err := <-tarErr; mstErr == nil {
		return err
	}
	return mstErr
}

// checkTarArgv archives the (empty, on a new pod) work folder to
// /dev/null: what the copies ask of tar, with GNU tar and busybox alike.
func checkTarArgv(set settings) []string {
	return []string{set.tar, "-c", "-f", "/dev/null", "-C", set.workDir, "."}
}

// checkTar runs tar in the pod name of image, as the copies will, and
// says what to do when it does not run: without tar in the image no file
// goes in or out of the pod by CopyTo or CopyFrom, the bundle first.
func checkTar(ctx context.Context, k *kubectl, name, image string, set settings) error {
	if _, err := k.run(ctx, nil, k.execArgs(name, false, checkTarArgv(set)...)...); err != nil {
		return fmt.Errorf("the image %s has no tar at %q that runs (%w): the runner copies files in and out of the pod, the bundle first, with tar there. "+
			"Use an image that has tar: the Debian worker image, which `mst runner setup docker --with debian` builds (as mst-worker:<version>-debian; every --with image has tar too; push it where the nodes pull from), "+
			"an image of your own that is Debian-based or has a static busybox, or name its tar with --runner-option %s=PATH. MST's minimal FROM-scratch image (plain `mst runner setup docker`) has no tar", image, set.tar, err, OptionTar)
	}
	return nil
}

// checkMST runs `mst version` in the pod name of image, with mst at the
// path mst, and says what is wrong when it does not print version. No
// label is needed on the image: the mst inside is asked itself.
func checkMST(ctx context.Context, k *kubectl, name, image, mst, version string) error {
	out, err := k.run(ctx, nil, k.execArgs(name, false, mst, "version")...)
	found, isMST := strings.CutPrefix(out, "mst ")
	switch {
	case err != nil:
		return fmt.Errorf("the image %s has no mst at %s that runs (%w). %s", image, mst, err, imageHelp(mst, version))
	case !isMST:
		return fmt.Errorf("%s in the image %s is not mst: `%s version` printed %q. %s", mst, image, mst, out, imageHelp(mst, version))
	case version != "" && found != version:
		return fmt.Errorf("the image %s holds mst %s at %s, and this coordinator is mst %s: the workers must run the coordinator's version. %s",
			image, found, mst, version, imageHelp(mst, version))
	}
	return nil
}

// imageHelp says how to give the pods an image with mst version at the
// path mst, or another path.
func imageHelp(mst, version string) string {
	v := "mst"
	if version != "" {
		v = "mst " + version
	}
	return fmt.Sprintf("Build the Debian worker image of this version with `mst runner setup docker --with debian` (it has the tar the copies need), push it where the cluster's nodes pull from, "+
		"and name it with --runner-option image=REF; or put %s in your own image (a static build runs in any image: "+
		"CGO_ENABLED=0 GOOS=linux go build -o mst ./cmd/mst) and name its path with --runner-option mst=PATH when it is not %s", v, mst)
}

// pod is one shard's machine: a running pod.
type pod struct {
	kubectl *kubectl
	name    string
	image   string
	set     settings
	// grace is how long a cancelled command gets at each step of its stop.
	grace  time.Duration
	logger *slog.Logger
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
// with the env option, argv under env with the marker and the variables
// of vars (KEY=value) set.
func commandArgv(set settings, marker string, argv []string, vars ...string) []string {
	if set.env == "" {
		return argv
	}
	return append(append([]string{set.env, runner.ExecMarkerEnv + "=" + marker}, vars...), argv...)
}

// Exec runs argv in the pod with kubectl exec --stdin, under mst's hidden
// `runner relay` (see runner.RunRelayed): kubectl exec can close the
// connection before the last of a command's stdout has come through, and
// exit 0 all the same, so the relay holds the command's end until this
// side has read all of it. When ctx ends, the command's stdin is closed;
// with the env option its processes in the pod are then sent SIGTERM, and
// SIGKILL after the runner's stop grace; without it, kubectl is sent
// SIGTERM (and killed after the grace), and the command ends when it reads
// the end of its stdin or with the pod. A non-zero exit comes back as an
// error with the command's ExitCode.
func (p *pod) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec in %s: no command", p.ID())
	}
	if err := p.relayed(ctx, argv, stdin, stdout, stderr); err != nil {
		return fmt.Errorf("%s in %s: %w", argv[0], p.ID(), err)
	}
	return nil
}

// relayed runs argv in the pod under the relay, stopping it as Exec says.
func (p *pod) relayed(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	marker := runner.NewMarker()
	stop := clicmd.Stop{Grace: p.grace}
	if p.set.env != "" {
		stop.Remote = func(ctx context.Context) error { return p.stopExec(ctx, marker) }
	}
	// With env, the command also learns the image the pod runs, pinned
	// by the digest the cluster reported once the pod was Ready (a pod
	// made from a reference already pinned has it from its manifest).
	var vars []string
	if strings.Contains(p.image, "@") {
		vars = append(vars, imageDigestEnv+"="+p.image)
	}
	args := p.kubectl.execArgs(p.name, true, commandArgv(p.set, marker, runner.RelayArgv(p.set.mst, argv), vars...)...)
	// kubectl's own stderr and the command's come from two goroutines.
	errOut := &lockedWriter{w: stderr}
	var execErr error
	err := runner.RunRelayed(func(in io.Reader, out io.Writer) error {
		execErr = p.kubectl.cli.Exec(ctx, args, in, out, errOut, stop)
		return execErr
	}, stdin, stdout, errOut)
	switch {
	case ctx.Err() != nil && execErr != nil:
		// Stopped: say so, rather than the code the stop ended it with.
		return execErr
	case errors.Is(err, runner.ErrRelayCut):
		return fmt.Errorf("kubectl exec: %w (kubectl exits 0 in this case: kubernetes/kubernetes#124571)", err)
	}
	return err
}

// stopExec stops the processes of the command marked with marker, through
// mst's hidden `runner stop-exec` in the pod.
func (p *pod) stopExec(ctx context.Context, marker string) error {
	_, err := p.kubectl.run(ctx, nil, p.kubectl.execArgs(p.name, false, runner.StopExecArgv(p.set.mst, marker, p.grace)...)...)
	if err != nil {
		p.logger.Debug("stopping a command in the pod failed; it ends with the pod", "pod", p.ID(), "err", err)
	}
	return err
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
	write := func(w io.Writer) error {
		return runner.WriteTar(w, localDir, strings.TrimPrefix(path.Clean(remoteDir), "/"))
	}
	if err := p.kubectl.cli.RunWriting(ctx, write, p.kubectl.execArgs(p.name, true, untarArgv(p.set)...)...); err != nil {
		return fmt.Errorf("copying %s to %s:%s (the image needs tar at %q, or set --runner-option tar=PATH): %w", localDir, p.ID(), remoteDir, p.set.tar, err)
	}
	return nil
}

// CopyFrom copies the file or folder remotePath in the pod to localPath,
// making the folders above it. Each file is written under a temporary name
// and renamed, so a reader never sees half of one. tar runs under the
// relay, as Exec's commands do, so a stream cut short is an error.
func (p *pod) CopyFrom(ctx context.Context, remotePath, localPath string) error {
	pr, pw := io.Pipe()
	read := make(chan error, 1)
	go func() {
		err := runner.ReadTar(pr, localPath)
		// Drain, so that tar can end.
		io.Copy(io.Discard, pr)
		read <- err
	}()
	var stderr bytes.Buffer
	err := p.relayed(ctx, tarArgv(p.set, remotePath), nil, pw, &stderr)
	pw.CloseWithError(err)
	rerr := <-read
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, lastLines(msg, 5))
		}
		return fmt.Errorf("copying %s:%s to %s: %w", p.ID(), remotePath, localPath, err)
	}
	if rerr != nil {
		return fmt.Errorf("copying %s:%s to %s: %w", p.ID(), remotePath, localPath, rerr)
	}
	return nil
}

// lockedWriter serializes writes to w. It is no io.ReaderFrom, so a copy
// into it writes in pieces rather than reading straight into w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
