package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/runner"
)

// Option names of the docker runner (--runner-option NAME=VALUE).
const (
	OptionImage   = "image"
	OptionMST     = "mst"
	OptionWorkDir = "workdir"
	OptionNetwork = "network"
	OptionMounts  = "mounts"
	// OptionCloudFiles mounts the cloud credential files of this
	// machine into the containers, for workers that write to a bucket.
	OptionCloudFiles = "cloudFiles"
	// OptionView publishes the live view of a desktop image's display
	// (VNC, view only) on this machine's loopback (desktop.go).
	OptionView = "view"
	// OptionExclusive runs one container at a time (desktop.go).
	OptionExclusive = "exclusive"
	// OptionDesktopPackage and OptionDesktopApp are setup's: a Debian
	// package of a desktop app to install in an image FROM the desktop
	// image, and the command line that starts it (MST_DESKTOP_APP).
	OptionDesktopPackage = "desktopPackage"
	OptionDesktopApp     = "desktopApp"
)

// Defaults of the options.
const (
	DefaultMST     = "/mst"
	DefaultWorkDir = "/work"
)

// Container labels. Leftovers finds a run's containers by LabelRun.
const (
	LabelRun     = "mst.run"
	LabelShard   = "mst.shard"
	LabelVersion = "mst.version"
	// LabelBinary, on the worker image, is the SHA-256 of the mst binary
	// inside, so a run can tell an image built from another binary.
	LabelBinary = "mst.binary"
)

// MaxShards is the fewest containers one run may start at once on one
// Docker host; a machine with more memory than 16 containers of 512 MiB
// need offers more (runner.MachineShards), counting this machine's memory
// (the Docker host's, when it is this machine).
const MaxShards = 16

const optionsSchema = `{"type":"object","additionalProperties":false,"properties":{
  "image": {"type":"string","description":"Worker image to use instead of the one mst runner setup docker builds: any Linux image, with or without labels, that holds this MST version at the path the mst option names.","x-defaultDescription":"mst-worker:<mst version>"},
  "mst": {"type":"string","description":"Path of mst inside the image.","default":"/mst"},
  "workdir": {"type":"string","description":"Folder in the container for the bundle and the transcripts; the worker's user must be able to write it.","default":"/work"},
  "network": {"type":"string","description":"Docker network of the containers: host reaches servers on this machine's localhost, none cuts every connection.","x-defaultDescription":"the Docker daemon's default"},
  "mounts": {"type":"boolean","description":"Bind-mount the folders of stdio servers given by absolute path, read-only at the same path; turn off for a remote Docker host.","default":true},
  "cloudFiles": {"type":"boolean","description":"With the run in a bucket: bind-mount, read-only at the same path, the credential files this machine's cloud chains name (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, GOOGLE_APPLICATION_CREDENTIALS, AWS_WEB_IDENTITY_TOKEN_FILE), so the workers write to the bucket as you do. The servers and clients in the container can read those files too.","default":false},
  "view": {"type":"string","description":"With a desktop image: serve each container's display as a view-only VNC without a password at this loopback address, 127.0.0.1:PORT (or PORT), shard i at PORT+i (every shard at PORT when containers run one at a time).","x-defaultDescription":"no live view"},
  "exclusive": {"type":"boolean","description":"Run one container at a time on the Docker host, as for clients that need the host to themselves (Cowork).","default":false},
  "desktopPackage": {"type":"string","description":"mst runner setup docker only: a desktop app's Debian package (PATH.deb) to install in an image FROM the desktop image; needs desktopApp."},
  "desktopApp": {"type":"string","description":"mst runner setup docker only: the shell command line that starts the app of desktopPackage (MST_DESKTOP_APP in the image)."}
}}`

// Definition is the docker runner, for the built-in registry.
func Definition() *runner.Definition {
	return &runner.Definition{
		Name:        "docker",
		Description: "Runs each shard in a container of its own on a Docker host (run mst runner setup docker first).",
		OS:          "linux",
		Options:     json.RawMessage(optionsSchema),
		MaxShards:   runner.MachineShards(MaxShards, 512<<20, ""),
		New:         New,
		Setup:       Setup,
		Leftovers:   Leftovers,
		Remove:      Remove,
		// A container's main process idles; a cancelled command is stopped
		// inside it.
		MachineCommands: []runner.MachineCommand{runner.IdleCommand(), runner.StopExecCommand()},
		// A detached run's coordinator runs in a container of its own on
		// the same Docker host (coordinator.go).
		Coordinator: CreateCoordinator,
	}
}

// settings are the runner's options, decoded.
type settings struct {
	image   string
	mst     string
	workDir string
	network string
	mounts  bool
	// cloudFiles is OptionCloudFiles.
	cloudFiles bool
	// view is OptionView: where this machine serves the live view of a
	// desktop container, nil for none.
	view *viewAddr
	// exclusive is OptionExclusive.
	exclusive bool
	// desktopPackage and desktopApp are setup's options.
	desktopPackage, desktopApp string
}

func parseSettings(options map[string]string) (settings, error) {
	s := settings{image: options[OptionImage], mst: DefaultMST, workDir: DefaultWorkDir, network: options[OptionNetwork], mounts: true}
	if v := options[OptionMST]; v != "" {
		s.mst = v
	}
	if v := options[OptionWorkDir]; v != "" {
		s.workDir = v
	}
	if !path.IsAbs(s.mst) || !path.IsAbs(s.workDir) {
		return s, fmt.Errorf("docker runner: --runner-option mst=%s workdir=%s: both are absolute paths inside the image", s.mst, s.workDir)
	}
	s.workDir = path.Clean(s.workDir)
	if v, ok := options[OptionMounts]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("docker runner: --runner-option mounts=%s: mounts is true or false", v)
		}
		s.mounts = b
	}
	if v, ok := options[OptionCloudFiles]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("docker runner: --runner-option cloudFiles=%s: cloudFiles is true or false", v)
		}
		s.cloudFiles = b
	}
	if v, ok := options[OptionExclusive]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("docker runner: --runner-option exclusive=%s: exclusive is true or false", v)
		}
		s.exclusive = b
	}
	if v := options[OptionView]; v != "" {
		view, err := parseView(v)
		if err != nil {
			return s, err
		}
		if s.network == "none" {
			return s, fmt.Errorf("docker runner: --runner-option view=%s needs a network, and network=none has none: leave out one or the other", v)
		}
		s.view = &view
	}
	s.desktopPackage, s.desktopApp = options[OptionDesktopPackage], options[OptionDesktopApp]
	return s, nil
}

// credentialFileVars name the files the cloud chains read credentials
// from, which cloudFiles mounts.
var credentialFileVars = []string{"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_WEB_IDENTITY_TOKEN_FILE"}

// credentialFiles are the existing files credentialFileVars name here,
// by absolute path.
func credentialFiles() []string {
	var out []string
	for _, v := range credentialFileVars {
		p := os.Getenv(v)
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	return out
}

// New makes the docker runner for one run: it checks that the Docker
// daemon answers and pins the worker image by id; an image named with
// OptionImage is checked to hold the coordinator's mst.
func New(ctx context.Context, p runner.Params) (runner.Runner, error) {
	set, err := parseSettings(p.Options)
	if err != nil {
		return nil, err
	}
	if set.desktopPackage != "" || set.desktopApp != "" {
		return nil, fmt.Errorf("docker runner: --runner-option %s and %s are for `mst runner setup docker`, which builds an image with the app: run in that image with the --runner-option image=REF setup printed", OptionDesktopPackage, OptionDesktopApp)
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, err := findCLI()
	if err != nil {
		return nil, err
	}
	_, arch, err := platform(ctx, c)
	if err != nil {
		return nil, err
	}
	version := p.MSTVersion
	if set.image == "" && version == "" {
		return nil, errors.New("docker runner: no MST version to find the worker image by: pass --runner-option image=REF")
	}
	img, err := resolveImage(ctx, c, set.image, version)
	if err != nil {
		return nil, err
	}
	if set.image == "" && len(p.MST) > 0 {
		warnStale(img, p.MST[0], arch, logger)
	}
	if set.image != "" {
		// An image of one's own need carry no label: what matters is the
		// mst inside, asked once here so a wrong image fails the run
		// before any shard starts, with one message.
		if _, err := checkVersion(ctx, c, img, set.mst, version, arch); err != nil {
			return nil, err
		}
	}
	if set.view != nil && !img.desktop {
		return nil, fmt.Errorf("docker runner: --runner-option view=%s shows the display of a desktop image, and %s is none (it has no %s label): "+
			"build one with `mst runner setup docker --with desktop` (docs/desktop.md), or leave out view", set.view, img.ref, LabelDesktop)
	}
	r := &dockerRunner{cli: c, set: set, img: img, version: version, arch: arch, params: p, logger: logger}
	if set.exclusive || p.HostExclusive {
		r.gate = newHostGate()
		if p.Shards > 1 {
			logger.Info("the shards' containers run one at a time on the Docker host (exclusive)", "shards", p.Shards)
		}
	}
	return r, nil
}

type dockerRunner struct {
	cli     *clicmd.CLI
	set     settings
	img     image
	version string
	// arch is the Docker host's architecture (amd64), for the messages
	// that say how to build an mst for its images.
	arch   string
	params runner.Params
	logger *slog.Logger
	// gate, when not nil, lets one shard's container live at a time
	// (exclusive).
	gate *hostGate
}

// RunShard runs one shard in a new container, named and labelled with the
// shard's run and attempt.
func (r *dockerRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	spec := containerSpec{run: s.Run, attempt: max(s.Attempt, 1), grade: s.Work == "grade"}
	if r.set.mounts {
		spec.mounts = bindMounts(s.HostPaths, r.set)
	}
	if r.set.image == "" {
		// MST's own image holds mst and nothing else: a server that needs
		// a loader, libraries or an interpreter cannot start in it. Say so
		// now, rather than as "no such file" from inside the container.
		for _, cmd := range s.HostPaths.Commands {
			if err := runsInBareImage(cmd); err != nil {
				return runner.ShardReport{}, err
			}
		}
	}
	if r.set.cloudFiles {
		spec.mounts = append(spec.mounts, credentialFiles()...)
	}
	create := func(ctx context.Context, i int) (runner.Machine, error) {
		spec := spec
		spec.shard = i
		return r.create(ctx, spec)
	}
	// With the host to one container at a time, the shard waits for its
	// turn before its container is created, and hands the turn on once
	// the container is removed (or kept).
	release, err := r.gate.acquire(ctx)
	if err != nil {
		return runner.ShardReport{}, fmt.Errorf("shard %d: waiting for its turn on the Docker host (exclusive): %w", s.Index, err)
	}
	defer release()
	rep, err := runner.MachineRunner(create, r.params).RunShard(ctx, s)
	if err != nil && strings.Contains(err.Error(), "readiness check failed") {
		user := ""
		if r.img.desktop {
			user = "; in a desktop image servers run as its desktop user, uid " + desktopUID + ", who must be let into a mounted command's folders"
		}
		err = fmt.Errorf("%w\n(with the docker runner, servers run inside the container: a stdio server's command must be in the image, "+
			"or a static binary given by absolute path on this machine (mounted read-only); a server URL must be reachable from the container, "+
			"and localhost there is the container itself unless --runner-option network=host%s)", err, user)
	}
	return rep, err
}

// Close does nothing: containers are removed as their shards end.
func (r *dockerRunner) Close() error { return nil }
