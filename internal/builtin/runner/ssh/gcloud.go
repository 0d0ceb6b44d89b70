package ssh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/runner"
)

// gcloudOptionsSchema is the JSON Schema of the gcloud runner's options.
const gcloudOptionsSchema = `{"type":"object","additionalProperties":false,"properties":{
  "project": {"type":"string","description":"Required: the Google Cloud project to create the VMs in."},
  "zone": {"type":"string","description":"Required: the Compute Engine zone of the VMs, such as europe-west4-a."},
  "machineType": {"type":"string","description":"Machine type of the VMs.","default":"e2-standard-4"},
  "image": {"type":"string","description":"Boot image of the VMs; overrides imageFamily.","x-defaultDescription":"the image family's newest"},
  "imageFamily": {"type":"string","description":"Image family of the VMs' boot image.","default":"debian-12"},
  "imageProject": {"type":"string","description":"Project of the image or image family.","x-defaultDescription":"debian-cloud when neither image nor imageFamily is given"},
  "network": {"type":"string","description":"VPC network of the VMs.","x-defaultDescription":"the project's default network"},
  "subnet": {"type":"string","description":"Subnetwork of the VMs.","x-defaultDescription":"the network's subnet in the zone's region"},
  "noAddress": {"type":"boolean","description":"Give the VMs no external IP address (IAP still reaches them; the worker then needs Cloud NAT to reach model providers).","default":false},
  "strictHostKeyChecking": {"type":"boolean","description":"Passed to gcloud compute ssh and scp as --strict-host-key-checking=yes or no.","x-defaultDescription":"gcloud's own behaviour"},
  "workDir": {"type":"string","description":"Folder on each VM for the shard's work folder.","default":"~/.cache/mst/work"},
  "mst": {"type":"string","description":"Path of an mst of this same version already in the image.","x-defaultDescription":"MST copies itself to each VM"},
  "gcloud": {"type":"string","description":"The gcloud command (on a detached run's coordinator VM too).","default":"gcloud"},
  "coordinatorServiceAccount": {"type":"string","description":"Required for mst run --detach: the service account (an email) a detached run's coordinator VM runs as; it creates, reaches and deletes the workers' VMs and writes the result store. Your gcloud login is never copied to it."}
}}`

// Defaults of the gcloud runner.
const (
	defaultMachineType  = "e2-standard-4"
	defaultImageFamily  = "debian-12"
	defaultImageProject = "debian-cloud"
	// bootWait bounds how long a new VM may take to accept SSH.
	bootWait = 5 * time.Minute
)

// gcloudOptions are the gcloud runner's options, read and checked.
type gcloudOptions struct {
	Project, Zone, MachineType    string
	Image, ImageFamily, ImageProj string
	Network, Subnet               string
	NoAddress                     bool
	// Strict is "", "yes" or "no".
	Strict  string
	WorkDir string
	MST     string
	Gcloud  string
	// CoordinatorSA is the service account of a detached run's
	// coordinator VM.
	CoordinatorSA string
}

// parseGcloudOptions reads the gcloud runner's options.
func parseGcloudOptions(m map[string]string) (gcloudOptions, error) {
	o := gcloudOptions{
		Project: m["project"], Zone: m["zone"], MachineType: m["machineType"],
		Image: m["image"], ImageFamily: m["imageFamily"], ImageProj: m["imageProject"],
		Network: m["network"], Subnet: m["subnet"], WorkDir: m["workDir"], MST: m["mst"], Gcloud: m["gcloud"],
		CoordinatorSA: m["coordinatorServiceAccount"],
	}
	if o.Project == "" || o.Zone == "" {
		return o, errors.New("gcloud runner: pass --runner-option project=PROJECT and --runner-option zone=ZONE")
	}
	if o.MachineType == "" {
		o.MachineType = defaultMachineType
	}
	if o.Image == "" && o.ImageFamily == "" {
		o.ImageFamily = defaultImageFamily
		if o.ImageProj == "" {
			o.ImageProj = defaultImageProject
		}
	}
	if o.WorkDir == "" {
		o.WorkDir = defaultWorkDir
	}
	if o.Gcloud == "" {
		o.Gcloud = "gcloud"
	}
	for key, dst := range map[string]*bool{"noAddress": &o.NoAddress} {
		if v := m[key]; v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, fmt.Errorf("--runner-option %s=%s: write true or false", key, v)
			}
			*dst = b
		}
	}
	if v := m["strictHostKeyChecking"]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("--runner-option strictHostKeyChecking=%s: write true or false", v)
		}
		o.Strict = map[bool]string{true: "yes", false: "no"}[b]
	}
	return o, nil
}

// GcloudDefinition is the gcloud runner: a Compute Engine VM per shard,
// reached through IAP with gcloud compute ssh and scp.
func GcloudDefinition() *runner.Definition {
	return &runner.Definition{
		Name:        "gcloud",
		Description: "Creates a Compute Engine VM per shard and reaches it through IAP (gcloud compute ssh/scp --tunnel-through-iap); deletes it after.",
		OS:          "linux",
		Options:     schema(gcloudOptionsSchema),
		MaxShards:   MaxShards,
		New:         newGcloudRunner,
		Leftovers:   gcloudLeftovers,
		Remove:      gcloudRemove,
		Coordinator: gcloudCoordinator,
	}
}

// The argument lists below are all the runner gives gcloud; tests check
// them exactly.

// scope is the project and zone flags every command takes.
func (o gcloudOptions) scope() []string {
	return []string{"--project=" + o.Project, "--zone=" + o.Zone}
}

// createArgs creates shard's VM, labelled with its run and shard.
func createArgs(o gcloudOptions, name, runID string, shard int, deadline time.Duration) []string {
	a := vmArgs(o, name)
	a = append(a, maxRunArgs(deadline)...)
	return append(a, "--labels=mst-run="+labelValue(runID)+",mst-shard="+strconv.Itoa(shard), "--quiet")
}

// maxRunArgs make Compute Engine delete a VM once it has run for
// deadline (rounded up to a second, within the 30 s to 120 days it takes).
func maxRunArgs(deadline time.Duration) []string {
	deadline = min(max(deadline, 30*time.Second), 120*24*time.Hour)
	secs := int64((deadline + time.Second - 1) / time.Second)
	return []string{"--max-run-duration=" + strconv.FormatInt(secs, 10) + "s", "--instance-termination-action=DELETE"}
}

// vmArgs are the start of a create command, what every VM of the runner
// shares: its name, place, machine, image and network.
func vmArgs(o gcloudOptions, name string) []string {
	a := []string{"compute", "instances", "create", name}
	a = append(a, o.scope()...)
	a = append(a, "--machine-type="+o.MachineType)
	if o.Image != "" {
		a = append(a, "--image="+o.Image)
	} else {
		a = append(a, "--image-family="+o.ImageFamily)
	}
	if o.ImageProj != "" {
		a = append(a, "--image-project="+o.ImageProj)
	}
	if o.Network != "" {
		a = append(a, "--network="+o.Network)
	}
	if o.Subnet != "" {
		a = append(a, "--subnet="+o.Subnet)
	}
	if o.NoAddress {
		a = append(a, "--no-address")
	}
	return a
}

// sshArgs runs cmdline on VM name through IAP.
func sshArgs(o gcloudOptions, name, cmdline string) []string {
	a := append([]string{"compute", "ssh", name}, o.scope()...)
	a = append(a, "--tunnel-through-iap", "--quiet")
	if o.Strict != "" {
		a = append(a, "--strict-host-key-checking="+o.Strict)
	}
	return append(a, "--command="+cmdline)
}

// scpArgs copies src to dst (one of them NAME:PATH) through IAP.
func scpArgs(o gcloudOptions, src, dst string) []string {
	a := append([]string{"compute", "scp"}, o.scope()...)
	a = append(a, "--tunnel-through-iap", "--quiet", "--recurse")
	if o.Strict != "" {
		a = append(a, "--strict-host-key-checking="+o.Strict)
	}
	return append(a, src, dst)
}

// deleteArgs deletes VM name.
func deleteArgs(o gcloudOptions, name string) []string {
	return append(append([]string{"compute", "instances", "delete", name}, o.scope()...), "--quiet")
}

// listArgs lists the project's VMs that runs made: those of runID, or of
// every run when it is "".
func listArgs(o gcloudOptions, runID string) []string {
	filter := "labels.mst-run:*"
	if runID != "" {
		filter = "labels.mst-run=" + labelValue(runID)
	}
	return []string{"compute", "instances", "list", "--project=" + o.Project, "--filter=" + filter,
		"--format=json(name,zone,status,creationTimestamp,labels)"}
}

// instanceName names shard's VM: mst-RUN-sN (-aK for a resumed run's
// attempt K), in the lowercase letters, digits and hyphens Compute Engine
// allows, at most 63 long; a run id too long to fit is cut and a hash of
// it keeps names apart.
func instanceName(runID string, shard, attempt int, grading bool) string {
	suffix := "-s" + strconv.Itoa(shard)
	if attempt > 1 {
		suffix += "-a" + strconv.Itoa(attempt)
	}
	if grading {
		suffix += "-g"
	}
	run := strings.Trim(nameChars.ReplaceAllString(strings.ToLower(runID), "-"), "-")
	if room := 63 - len("mst-") - len(suffix); len(run) > room {
		sum := sha256.Sum256([]byte(runID))
		run = strings.TrimRight(run[:room-7], "-") + "-" + hex.EncodeToString(sum[:3])
	}
	return "mst-" + run + suffix
}

var (
	nameChars  = regexp.MustCompile(`[^a-z0-9]+`)
	labelChars = regexp.MustCompile(`[^a-z0-9_-]`)
)

// labelValue turns a run id into a label value: lowercase letters,
// digits, _ and -, at most 63 long.
func labelValue(runID string) string {
	v := labelChars.ReplaceAllString(strings.ToLower(runID), "_")
	if len(v) > 63 {
		sum := sha256.Sum256([]byte(runID))
		v = v[:56] + "-" + hex.EncodeToString(sum[:3])
	}
	return v
}

// vmID names a VM as Compute Engine's resource path does.
func vmID(o gcloudOptions, zone, name string) string {
	return "projects/" + o.Project + "/zones/" + zone + "/instances/" + name
}

var vmIDPattern = regexp.MustCompile(`^projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$`)

// gcloudRunner is the gcloud runner for one run.
type gcloudRunner struct {
	params runner.Params
	opts   gcloudOptions
	local  *localMST
	logger *slog.Logger
}

func newGcloudRunner(ctx context.Context, p runner.Params) (runner.Runner, error) {
	o, err := parseGcloudOptions(p.Options)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(o.Gcloud); err != nil {
		return nil, fmt.Errorf("gcloud runner: %s not found: install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install) or pass --runner-option gcloud=PATH", o.Gcloud)
	}
	local, err := inspectLocal(ctx, p.MST, p.MSTVersion)
	if err != nil {
		return nil, fmt.Errorf("gcloud runner: %w", err)
	}
	if o.MST == "" && local.goos != "linux" {
		return nil, fmt.Errorf("gcloud runner: this mst is %s/%s and the VMs run Linux: put a Linux mst %s in the image and pass --runner-option mst=PATH", local.goos, local.goarch, strings.TrimPrefix(local.version, "mst "))
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if o.Strict == "no" {
		logger.Warn("strictHostKeyChecking=false: gcloud compute ssh accepts any host key of the VMs")
	}
	return &gcloudRunner{params: p, opts: o, local: local, logger: logger}, nil
}

// RunShard runs one shard on a VM made for it.
func (r *gcloudRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	create := func(ctx context.Context, i int) (runner.Machine, error) {
		m, err := r.create(ctx, s.Run, max(s.Attempt, 1), i, s.Work == "grade")
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return runner.MachineRunner(create, r.params).RunShard(ctx, s)
}

// create makes shard i's VM, waits until it takes SSH, installs mst on it
// and makes the work folder. A VM that cannot be made ready is deleted.
func (r *gcloudRunner) create(ctx context.Context, runID string, attempt, i int, grading bool) (*machine, error) {
	o := r.opts
	name := instanceName(runID, i, attempt, grading)
	m, err := readyVM(ctx, o, name, createArgs(o, name, runID, i, r.params.MachineDeadline()), folderName(runID, i, attempt, grading), r.local, r.logger, "the VM")
	if err != nil {
		return nil, err
	}
	m.image = o.Image
	if m.image == "" {
		m.image = o.ImageProj + "/" + o.ImageFamily
	}
	return m, nil
}

// readyVM creates the VM name with the gcloud arguments args, waits until
// it takes SSH, makes sure it has mst and makes the folder folder in its
// work folder. A VM that cannot be made ready is deleted. what names it in
// errors ("the VM", "the coordinator VM").
func readyVM(ctx context.Context, o gcloudOptions, name string, args []string, folder string, local *localMST, logger *slog.Logger, what string) (_ *machine, err error) {
	if _, err := gcloudOutput(ctx, o.Gcloud, args); err != nil {
		return nil, fmt.Errorf("creating %s %s: %w", what, name, err)
	}
	rem := &gcloudRemote{o: o, vm: name}
	remove := func(ctx context.Context) error {
		_, err := gcloudOutput(ctx, o.Gcloud, deleteArgs(o, name))
		return err
	}
	defer func() {
		if err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			defer cancel()
			if derr := remove(dctx); derr != nil {
				logger.Warn("deleting a VM that did not get ready failed", "vm", name, "err", derr)
			}
		}
	}()
	info, err := prepareVM(ctx, rem, local, o.MST)
	if err != nil {
		return nil, err
	}
	dir := path.Join(hostPath(o.WorkDir, info.home), folder)
	if _, err := output(ctx, rem, "mkdir -p "+quote(dir)); err != nil {
		return nil, fmt.Errorf("making the work folder on %s: %w", name, err)
	}
	return &machine{r: rem, id: vmID(o, o.Zone, name), dir: dir, mst: []string{info.mst}, remove: remove}, nil
}

// prepareVM waits until a new VM takes SSH, probes it and makes sure it
// has mst.
func prepareVM(ctx context.Context, rem *gcloudRemote, local *localMST, given string) (hostInfo, error) {
	if err := waitSSH(ctx, rem); err != nil {
		return hostInfo{}, err
	}
	info, err := probe(ctx, rem)
	if err != nil {
		return info, err
	}
	if info.mst, err = ensureMST(ctx, rem, info, local, given); err != nil {
		return info, err
	}
	return info, nil
}

// waitSSH tries `true` on a new VM until it answers, for up to bootWait.
func waitSSH(ctx context.Context, rem *gcloudRemote) error {
	ctx, cancel := context.WithTimeout(ctx, bootWait)
	defer cancel()
	for {
		_, err := output(ctx, rem, "true")
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the VM %s did not take SSH through IAP within %s (is there a firewall rule that lets 35.235.240.0/20 reach port 22?): %w", rem.vm, bootWait, err)
		case <-time.After(5 * time.Second):
		}
	}
}

// Close does nothing: each shard deletes its own VM.
func (r *gcloudRunner) Close() error { return nil }

// gcloudRemote is a VM reached with gcloud compute ssh and scp. Each
// command is a gcloud process of its own.
type gcloudRemote struct {
	o  gcloudOptions
	vm string
}

func (g *gcloudRemote) name() string { return g.vm }
func (g *gcloudRemote) close() error { return nil }

// run runs cmdline with gcloud compute ssh. When ctx ends, gcloud gets
// SIGTERM (ending its ssh, and so the command's stdin), then SIGKILL.
func (g *gcloudRemote) run(ctx context.Context, cmdline string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, g.o.Gcloud, sshArgs(g.o, g.vm, cmdline)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	proctree.Group(cmd)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopStep
	// Stdin goes through a pipe of run's own: exec.Cmd would otherwise
	// wait for a stdin that stays open (a worker's does) after gcloud
	// exited.
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running %s: %w", g.o.Gcloud, err)
	}
	go func() {
		if stdin != nil {
			io.Copy(in, stdin)
		}
		in.Close()
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("stopped (%w): %v", ctx.Err(), err)
	case errors.As(err, &ee) && ee.ExitCode() == 255:
		// ssh's own failures, a dropped connection among them, exit 255.
		return fmt.Errorf("gcloud compute ssh %s exited with code 255: %w", g.vm, errLost)
	case errors.As(err, &ee):
		return &exitError{host: g.vm, code: ee.ExitCode()}
	}
	return fmt.Errorf("running gcloud compute ssh %s: %w", g.vm, err)
}

// copyTo replaces remoteDir with a copy of localDir.
func (g *gcloudRemote) copyTo(ctx context.Context, localDir, remoteDir string) error {
	if _, err := output(ctx, g, "mkdir -p "+quote(path.Dir(remoteDir))+" && rm -rf "+quote(remoteDir)); err != nil {
		return fmt.Errorf("copying %s to %s: %w", localDir, g.vm, err)
	}
	if _, err := gcloudOutput(ctx, g.o.Gcloud, scpArgs(g.o, localDir, g.vm+":"+remoteDir)); err != nil {
		return fmt.Errorf("copying %s to %s:%s: %w", localDir, g.vm, remoteDir, err)
	}
	return nil
}

// copyFrom copies remotePath into a temporary folder beside localPath and
// renames it into place.
func (g *gcloudRemote) copyFrom(ctx context.Context, remotePath, localPath string) error {
	if err := os.MkdirAll(filepath.Dir(localPath), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(localPath), ".tmp-copy-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := gcloudOutput(ctx, g.o.Gcloud, scpArgs(g.o, g.vm+":"+remotePath, tmp+"/")); err != nil {
		return fmt.Errorf("copying %s:%s: %w", g.vm, remotePath, err)
	}
	got := filepath.Join(tmp, path.Base(remotePath))
	if st, err := os.Stat(got); err == nil && st.IsDir() {
		if err := os.RemoveAll(localPath); err != nil {
			return err
		}
	}
	return os.Rename(got, localPath)
}

// gcloudOutput runs gcloud with args and returns its stdout; a failure
// carries what gcloud printed on stderr.
func gcloudOutput(ctx context.Context, gcloud string, args []string) (string, error) {
	// A gcloud that hangs (an API that stopped answering) ends the call
	// with an error that says so, rather than hold the run.
	ctx, cancel := context.WithTimeoutCause(ctx, gcloudLimit, errGcloudLimit)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, gcloud, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &limited{buf: &stderr, n: 4096}
	proctree.Group(cmd)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopStep
	if err := cmd.Run(); err != nil {
		if errors.Is(context.Cause(ctx), errGcloudLimit) {
			err = fmt.Errorf("%w: it did not finish within %s (is the Compute Engine API answering?)", err, gcloudLimit)
		}
		return stdout.String(), fmt.Errorf("gcloud %s: %w%s", strings.Join(args[:min(3, len(args))], " "), err, stderrNote(&stderr))
	}
	return stdout.String(), nil
}

// gcloudLimit bounds one gcloud command that asks, creates or deletes (a
// VM's creation included: gcloud returns once the API took it).
const gcloudLimit = 10 * time.Minute

// errGcloudLimit is the cause of a gcloud command's context that
// gcloudLimit ended.
var errGcloudLimit = errors.New("gcloud's time limit passed")

// gcloudLeftovers lists the VMs runs left in the project.
func gcloudLeftovers(ctx context.Context, options map[string]string, runID string) ([]runner.Leftover, error) {
	o, err := parseGcloudOptions(options)
	if err != nil {
		return nil, err
	}
	out, err := gcloudOutput(ctx, o.Gcloud, listArgs(o, runID))
	if err != nil {
		return nil, err
	}
	return parseInstances(o, out)
}

// parseInstances reads `gcloud compute instances list --format=json`.
func parseInstances(o gcloudOptions, list string) ([]runner.Leftover, error) {
	var vms []struct {
		Name    string            `json:"name"`
		Zone    string            `json:"zone"`
		Status  string            `json:"status"`
		Created string            `json:"creationTimestamp"`
		Labels  map[string]string `json:"labels"`
	}
	if err := json.Unmarshal([]byte(list), &vms); err != nil {
		return nil, fmt.Errorf("reading gcloud compute instances list: %w", err)
	}
	var out []runner.Leftover
	for _, vm := range vms {
		n, _ := strconv.Atoi(vm.Labels["mst-shard"])
		out = append(out, runner.Leftover{
			ID: vmID(o, path.Base(vm.Zone), vm.Name), Run: vm.Labels["mst-run"], Shard: n,
			Detail: strings.TrimSpace(strings.ToLower(vm.Status) + " since " + vm.Created),
		})
	}
	return out, nil
}

// gcloudRemove deletes one leftover VM of the project.
func gcloudRemove(ctx context.Context, options map[string]string, l runner.Leftover) error {
	o, err := parseGcloudOptions(options)
	if err != nil {
		return err
	}
	m := vmIDPattern.FindStringSubmatch(l.ID)
	if m == nil || m[1] != o.Project || !strings.HasPrefix(m[3], "mst-") {
		return fmt.Errorf("%s is not a VM of the gcloud runner in project %s (projects/%s/zones/ZONE/instances/mst-…)", l.ID, o.Project, o.Project)
	}
	o.Zone = m[2]
	_, err = gcloudOutput(ctx, o.Gcloud, deleteArgs(o, m[3]))
	return err
}
