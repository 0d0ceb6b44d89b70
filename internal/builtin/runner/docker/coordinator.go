package docker

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/runner"
)

// LabelCoordinator labels a detached run's coordinator container with the
// detached run's id; Leftovers finds coordinator containers by it.
const LabelCoordinator = "mst.coordinator"

// CoordinatorCLI is where the coordinator container has the docker CLI:
// this machine's, bind-mounted read-only.
const CoordinatorCLI = "/usr/local/bin/docker"

// defaultSocket is the Docker daemon's socket when nothing says another.
const defaultSocket = "/var/run/docker.sock"

// CreateCoordinator makes a detached run's coordinator machine: a
// container of the worker image (or the image option's) named
// mst-coordinator-<id>, with the Docker daemon's socket, this machine's
// docker CLI and the eval's files mounted, so the coordinator inside can run
// `mst run --runner docker` and start the workers beside it on the same
// Docker host. Its main process is `mst runner idle --deadline D` and it is
// started with --rm, so it removes itself at the deadline whatever the
// coordinator does.
func CreateCoordinator(ctx context.Context, p runner.CoordinatorParams) (runner.CoordinatorMachine, error) {
	c, err := findCLI()
	if err != nil {
		return nil, err
	}
	return createCoordinator(ctx, p, c, c.Bin)
}

// createCoordinator is CreateCoordinator with the docker CLI c to run here
// and the program cliBin to mount into the container (c's own, except in
// tests).
func createCoordinator(ctx context.Context, p runner.CoordinatorParams, c *clicmd.CLI, cliBin string) (runner.CoordinatorMachine, error) {
	set, err := parseSettings(p.Options)
	if err != nil {
		return nil, err
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if p.ID == "" {
		return nil, errors.New("docker runner: a coordinator container needs the detached run's id")
	}
	_, arch, err := platform(ctx, c)
	if err != nil {
		return nil, err
	}
	if set.image == "" && p.MSTVersion == "" {
		return nil, errors.New("docker runner: no MST version to find the coordinator's image by: pass --runner-option image=REF")
	}
	img, err := resolveImage(ctx, c, set.image, p.MSTVersion)
	if err != nil {
		return nil, err
	}
	// The coordinator runs the launching mst's version, as the workers
	// do; asked once in a throwaway container, so a wrong image fails
	// here with the message workers would give.
	if _, err := checkVersion(ctx, c, img, set.mst, p.MSTVersion, arch); err != nil {
		return nil, err
	}
	ep, err := daemonEndpoint(ctx, c)
	if err != nil {
		return nil, err
	}
	cli, err := cliMounts(cliBin, arch)
	if err != nil {
		return nil, err
	}
	spec := coordinatorSpec{
		name: coordinatorName(p.ID), id: p.ID, version: p.MSTVersion, image: img.id, set: set,
		endpoint: ep, deadline: p.Deadline, envNames: runner.SetCloudChainVars(),
		path: withLocalBin(imagePath(ctx, c, img.id)),
	}
	if img.desktop {
		// A desktop image runs as its desktop user, who cannot reach the
		// Docker socket; the coordinator runs no app, and as root.
		spec.user = "root"
	}
	spec.mounts = append(spec.mounts, cli...)
	spec.mounts = append(spec.mounts, ep.mounts()...)
	if set.mounts {
		for _, m := range bindMounts(p.HostPaths, set) {
			spec.mounts = append(spec.mounts, mount{source: m, target: m, readonly: true})
		}
	}
	if set.cloudFiles {
		for _, f := range credentialFiles() {
			spec.mounts = append(spec.mounts, mount{source: f, target: f, readonly: true})
		}
	}
	for _, v := range []string{"DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"} {
		if ep.socket == "" && os.Getenv(v) != "" {
			spec.envNames = append(spec.envNames, v)
		}
	}
	if _, err := c.Run(ctx, nil, spec.args()...); err != nil {
		if says(err, "already in use") {
			// Another container holds the name: not ours to remove.
			return nil, fmt.Errorf("docker runner: a container named %s is already on the Docker host (a coordinator of the same detached run?): "+
				"remove it with `mst runner cleanup --runner docker %s` or `docker rm -f %s`, then try again", spec.name, p.ID, spec.name)
		}
		// A container that was created but could not start stays behind
		// even with --rm.
		removeContainer(context.WithoutCancel(ctx), c, spec.name)
		return nil, fmt.Errorf("docker runner: starting the coordinator container %s of %s: %w", spec.name, img.ref, err)
	}
	logger.Debug("started the coordinator container", "container", spec.name, "image", img.ref, "deadline", spec.deadlineOrDefault())
	return &coordinatorContainer{
		container: container{cli: c, name: spec.name, img: img, mst: set.mst, workDir: set.workDir, grace: runner.DefaultStopGrace, logger: logger},
		env:       []string{"DOCKER_HOST=" + ep.host, "PATH=" + spec.path},
		endpoint:  ep,
	}, nil
}

// coordinatorName is mst-coordinator-<id>, with any character Docker
// refuses in a name replaced by '-'.
func coordinatorName(id string) string {
	return notNameChar.ReplaceAllString("mst-coordinator-"+id, "-")
}

// coordinatorContainer is a detached run's coordinator machine. Exec,
// CopyTo and CopyFrom are a worker container's.
type coordinatorContainer struct {
	container
	env      []string
	endpoint endpoint
}

func (c *coordinatorContainer) Env() []string { return slices.Clone(c.env) }

// Finish removes the container from inside it, with the mounted docker
// CLI. The command is killed with the container, so it may report a
// failure though the container is gone.
func (c *coordinatorContainer) Finish() []string {
	return []string{CoordinatorCLI, "rm", "--force", "--volumes", c.name}
}

func (c *coordinatorContainer) Identity() string {
	reach := "the Docker daemon's socket " + c.endpoint.socket + " mounted"
	if c.endpoint.socket == "" {
		reach = "the Docker API at " + c.endpoint.host
	}
	return fmt.Sprintf("the container %s on the Docker host %s, running as the image's user (root in MST's worker image), with %s: "+
		"it can start and remove any container on that host, which is as much as root there", c.name, c.endpoint.host, reach)
}

// Dispose removes the container. A container that is gone, or going, is
// not an error.
func (c *coordinatorContainer) Dispose(ctx context.Context) error {
	err := removeContainer(ctx, c.cli, c.name)
	if err != nil && says(err, "already in progress") {
		return nil
	}
	return err
}

// mount is a bind mount of the coordinator container.
type mount struct {
	source, target string
	readonly       bool
}

func (m mount) flag() string {
	s := "type=bind,source=" + m.source + ",target=" + m.target
	if m.readonly {
		s += ",readonly"
	}
	return s
}

// coordinatorSpec is everything the coordinator's docker run says.
type coordinatorSpec struct {
	name, id, version, image string
	set                      settings
	endpoint                 endpoint
	deadline                 time.Duration
	// envNames are variables passed on by name from this process's
	// environment (the cloud chains'), so no value is in the argv.
	envNames []string
	// path is the container's PATH.
	path   string
	mounts []mount
	// user is who the coordinator runs as, "" for the image's user.
	user string
}

func (s coordinatorSpec) deadlineOrDefault() time.Duration {
	if s.deadline > 0 {
		return s.deadline
	}
	return runner.DefaultCoordinatorDeadline
}

// args is the docker run command line that starts the coordinator
// container.
func (s coordinatorSpec) args() []string {
	a := []string{"run", "--detach", "--rm", "--name", s.name,
		"--label", LabelCoordinator + "=" + s.id,
		"--label", LabelVersion + "=" + s.version,
		"--security-opt", "no-new-privileges",
		"--tmpfs", "/run/mst:rw,mode=0700",
		"--tmpfs", "/tmp:rw,mode=1777",
		"--env", "DOCKER_HOST=" + s.endpoint.host,
		"--env", "PATH=" + s.path,
	}
	for _, name := range s.envNames {
		a = append(a, "--env", name)
	}
	if s.set.network != "" {
		a = append(a, "--network", s.set.network)
	}
	if s.user != "" {
		a = append(a, "--user", s.user)
	}
	seen := map[string]bool{}
	for _, m := range s.mounts {
		if seen[m.target] {
			continue
		}
		seen[m.target] = true
		a = append(a, "--mount", m.flag())
	}
	return append(a, "--entrypoint", s.set.mst, s.image, "runner", "idle", "--deadline", s.deadlineOrDefault().String())
}

// endpoint is how the coordinator container reaches the Docker daemon.
type endpoint struct {
	// host is the DOCKER_HOST the container gets.
	host string
	// socket is the daemon's unix socket, mounted at the same path; ""
	// for a tcp:// daemon.
	socket string
	// certs is DOCKER_CERT_PATH for a tcp:// daemon, mounted read-only.
	certs string
}

func (e endpoint) mounts() []mount {
	switch {
	case e.socket != "":
		return []mount{{source: e.socket, target: e.socket}}
	case e.certs != "":
		return []mount{{source: e.certs, target: e.certs, readonly: true}}
	}
	return nil
}

// daemonEndpoint asks the docker CLI which daemon it talks to (DOCKER_HOST,
// or the current context's), and says how the container reaches the same.
func daemonEndpoint(ctx context.Context, c *clicmd.CLI) (endpoint, error) {
	host, err := c.Run(ctx, nil, "context", "inspect", "--format", "{{.Endpoints.docker.Host}}")
	if err != nil || host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	return parseEndpoint(host, os.Getenv("DOCKER_CERT_PATH"))
}

// parseEndpoint reads a DOCKER_HOST value ("" is the default socket).
func parseEndpoint(host, certPath string) (endpoint, error) {
	if host == "" {
		host = "unix://" + defaultSocket
	}
	scheme, rest, _ := strings.Cut(host, "://")
	switch scheme {
	case "unix":
		if !path.IsAbs(rest) {
			return endpoint{}, fmt.Errorf("docker runner: DOCKER_HOST=%s: a unix socket is named by absolute path, as unix:///var/run/docker.sock", host)
		}
		return endpoint{host: host, socket: path.Clean(rest)}, nil
	case "tcp":
		e := endpoint{host: host}
		if filepath.IsAbs(certPath) {
			if st, err := os.Stat(certPath); err == nil && st.IsDir() {
				e.certs = certPath
			}
		}
		return e, nil
	}
	return endpoint{}, fmt.Errorf("docker runner: the Docker daemon is at %s, and a coordinator container reaches one only through a unix socket on its host "+
		"or at tcp://HOST:PORT: point DOCKER_HOST at one of those to detach a run", host)
}

// imagePath is the PATH the image sets, or "" when it sets none or the
// image cannot be asked.
func imagePath(ctx context.Context, c *clicmd.CLI, id string) string {
	out, err := c.Run(ctx, nil, "image", "inspect", "--format", "{{json .Config.Env}}", id)
	if err != nil {
		return ""
	}
	var env []string
	json.Unmarshal([]byte(out), &env)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// withLocalBin is the PATH p with the mounted CLI's folder first.
func withLocalBin(p string) string {
	dir := path.Dir(CoordinatorCLI)
	if p == "" {
		return dir + ":/usr/bin:/bin"
	}
	if slices.Contains(strings.Split(p, ":"), dir) {
		return p
	}
	return dir + ":" + p
}

// cliMounts are the mounts that give the coordinator container the docker
// CLI at bin: the program itself at CoordinatorCLI, read-only, and, for a
// dynamically linked one, its ELF interpreter and the shared libraries it
// needs at their paths here (and this machine's loader cache when one of
// them is where the loader looks only through the cache), so that it runs
// in MST's scratch worker image. arch is the Docker host's architecture.
func cliMounts(bin, arch string) ([]mount, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("docker runner: the docker CLI %s is not a Linux program (%v), and a coordinator container runs this machine's CLI: "+
			"detach from a Linux machine whose docker CLI is built for the Docker host (%s)", bin, err, arch)
	}
	defer f.Close()
	if want, ok := elfMachines[arch]; ok && f.Machine != want {
		return nil, fmt.Errorf("docker runner: the docker CLI %s is built for %s, and the Docker host runs %s: a coordinator container runs this machine's CLI, "+
			"so detach from a machine of the Docker host's architecture", bin, f.Machine, arch)
	}
	mounts := []mount{{source: bin, target: CoordinatorCLI, readonly: true}}
	deps, err := elfDeps(f, bin, confLibDirs(ldConf, 0))
	if err != nil {
		return nil, err
	}
	if deps.interp == "" {
		return mounts, nil
	}
	mounts = append(mounts, mount{source: deps.interp, target: deps.interp, readonly: true})
	for _, l := range deps.libs {
		mounts = append(mounts, mount{source: l, target: l, readonly: true})
	}
	if deps.needCache {
		mounts = append(mounts, mount{source: ldCache, target: ldCache, readonly: true})
	}
	return mounts, nil
}

// ldCache is the loader's cache of where libraries are.
const ldCache = "/etc/ld.so.cache"

// ldConf is the loader's list of library folders, which its cache holds.
const ldConf = "/etc/ld.so.conf"

// elfDependencies is what a dynamically linked program needs to start.
type elfDependencies struct {
	// interp is the program's ELF interpreter, "" for a static program.
	interp string
	// libs are the shared libraries it loads, directly or through one
	// another, by the paths the loader would find them at here.
	libs []string
	// needCache is set when a library is in a folder the loader searches
	// only through its cache (one of ld.so.conf's).
	needCache bool
}

// elfDeps finds the interpreter and the libraries of the program f, read
// from bin, as the loader would: each object's DT_RPATH or DT_RUNPATH,
// then conf, the folders of ld.so.conf (which the cache holds), then the
// loader's own.
func elfDeps(f *elf.File, bin string, conf []string) (elfDependencies, error) {
	var deps elfDependencies
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(io.LimitReader(prog.Open(), 4096))
			deps.interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if deps.interp == "" {
		return deps, nil
	}
	system := systemLibDirs(f.Machine, f.Class)
	seen := map[string]bool{path.Base(deps.interp): true}
	type object struct {
		file *elf.File
		path string
	}
	queue := []object{{f, bin}}
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		needed, err := obj.file.ImportedLibraries()
		if err != nil {
			return deps, fmt.Errorf("docker runner: reading the libraries %s needs: %w", obj.path, err)
		}
		own, err := runPaths(obj.file, obj.path)
		if err != nil {
			return deps, err
		}
		for _, name := range needed {
			if seen[name] {
				continue
			}
			seen[name] = true
			found, lf := "", (*elf.File)(nil)
			var dirs []string
			if strings.Contains(name, "/") {
				dirs = []string{""}
			} else {
				dirs = slices.Concat(own, conf, system)
			}
			for _, d := range dirs {
				p := name
				if d != "" {
					p = path.Join(d, name)
				}
				if g, err := elf.Open(p); err == nil {
					if g.Machine == f.Machine && g.Class == f.Class {
						found, lf = p, g
						if d != "" && !slices.Contains(own, d) && !slices.Contains(system, d) {
							deps.needCache = true
						}
						break
					}
					g.Close()
				}
			}
			if lf == nil {
				return deps, fmt.Errorf("docker runner: the docker CLI %s is linked dynamically and needs %s, which is not in the folders the loader searches here: "+
					"install a static docker CLI (the one from download.docker.com is static) to detach a run", bin, name)
			}
			deps.libs = append(deps.libs, found)
			queue = append(queue, object{lf, found})
			defer lf.Close()
		}
	}
	return deps, nil
}

// runPaths are the folders an object's DT_RUNPATH (or, without one, its
// DT_RPATH) names. A folder relative to the object's own ($ORIGIN) cannot
// be the same inside the container, where the CLI is at CoordinatorCLI.
func runPaths(f *elf.File, p string) ([]string, error) {
	list, _ := f.DynString(elf.DT_RUNPATH)
	if len(list) == 0 {
		list, _ = f.DynString(elf.DT_RPATH)
	}
	var dirs []string
	for _, entry := range list {
		for _, d := range strings.Split(entry, ":") {
			switch {
			case d == "":
			case strings.Contains(d, "$"):
				return nil, fmt.Errorf("docker runner: %s finds its libraries relative to its own folder (%s), which a coordinator container cannot reproduce: "+
					"install a static docker CLI (the one from download.docker.com is static) to detach a run", p, d)
			case path.IsAbs(d):
				dirs = append(dirs, path.Clean(d))
			}
		}
	}
	return dirs, nil
}

// multiarch are the Debian multiarch triplets of the ELF machines.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
	elf.EM_386:     "i386-linux-gnu",
	elf.EM_ARM:     "arm-linux-gnueabihf",
	elf.EM_PPC64:   "powerpc64le-linux-gnu",
	elf.EM_S390:    "s390x-linux-gnu",
	elf.EM_RISCV:   "riscv64-linux-gnu",
}

// systemLibDirs are the folders a loader searches without its cache:
// glibc's (the multiarch ones on Debian, lib64 on Fedora) and musl's.
func systemLibDirs(m elf.Machine, class elf.Class) []string {
	var dirs []string
	if t, ok := multiarch[m]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	if class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	return append(dirs, "/lib", "/usr/lib")
}

// confLibDirs are the folders an ld.so.conf file names, with the files it
// includes.
func confLibDirs(file string, depth int) []string {
	f, err := os.Open(file)
	if err != nil || depth > 8 {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if pattern, ok := strings.CutPrefix(line, "include"); ok && pattern != "" && (pattern[0] == ' ' || pattern[0] == '\t') {
			pattern = strings.TrimSpace(pattern)
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(filepath.Dir(file), pattern)
			}
			matches, _ := filepath.Glob(pattern)
			slices.Sort(matches)
			for _, m := range matches {
				dirs = append(dirs, confLibDirs(m, depth+1)...)
			}
			continue
		}
		if filepath.IsAbs(line) {
			dirs = append(dirs, filepath.Clean(line))
		}
	}
	return dirs
}
