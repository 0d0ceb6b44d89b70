package docker

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/runner"
)

// Worker images with a userland: `mst runner setup docker --with LIST`
// builds, beside the minimal FROM-scratch image, a Debian worker image and,
// on top of it, a Python image when LIST names python, and a Node image
// when LIST names Node or npm packages (on the Python image when both).
// Their Dockerfiles are in images/. The npm packages are installed on the
// machine that runs setup, into the build context, so the Debian and Node
// builds need no network: only the Debian base image on the Docker host.
// The Python image installs Debian's python3 with apt, so its build needs
// a Debian mirror (the network option is the build's network), and so does
// the desktop image on top of it (desktop.go, Dockerfile.desktop).

//go:embed images/Dockerfile.debian images/Dockerfile.python images/Dockerfile.node images/Dockerfile.desktop images/Dockerfile.desktop-app images/desktop
var userlandFiles embed.FS

// DebianBase is the public image the Debian worker image starts FROM: the
// Debian release MST is tested on, in Docker's slim variant.
const DebianBase = "debian:bookworm-slim"

// Userland is one name `mst runner setup docker --with` takes: a part of a
// worker image. docs/docker.md describes each.
type Userland struct {
	Name string
	// NPM is the npm package, with its version pinned as scripts/peers
	// pins it; "" for a part that is not an npm package. For node, CPU
	// stands for the Docker host's architecture in npm's words (x64,
	// arm64).
	NPM string
	// Commands are the programs it puts on the image's PATH.
	Commands []string
	// Needs is the part it is built on, which --with then adds ("" for
	// none besides debian; every npm package needs node).
	Needs string
}

// Userlands are the names --with takes, in the order they appear in an
// image's tag. Every npm package needs node, which --with then adds.
var Userlands = []Userland{
	{Name: "debian"},
	{Name: "python", Commands: []string{"python3"}},
	{Name: "node", NPM: "node-linux-CPU@22", Commands: []string{"node"}},
	{Name: "claude-code", NPM: "@anthropic-ai/claude-code@2.1.332", Commands: []string{"claude"}},
	{Name: "codex-cli", NPM: "@openai/codex@0.171.0", Commands: []string{"codex"}},
	{Name: "gemini-cli", NPM: "@google/gemini-cli@0.61.0", Commands: []string{"gemini"}},
	{Name: "everything", NPM: "@modelcontextprotocol/server-everything@2026.8.31", Commands: []string{"mcp-server-everything"}},
	{Name: "filesystem", NPM: "@modelcontextprotocol/server-filesystem@2026.8.31", Commands: []string{"mcp-server-filesystem"}},
	// The desktop image is built on the Python image, before Node, so
	// images with other npm packages share it; its name comes last in
	// the tag all the same.
	{Name: "desktop", Needs: "python", Commands: []string{"Xvfb", "dbus-daemon", "gdbus", "gnome-keyring-daemon", "x11vnc", "mst-desktop-session", "mst-desktop-restart"}},
}

// clientSetupEnv is the variable that tells a worker how a client's
// program gets onto its machine (shard.ClientSetupEnv, which a runner
// cannot import), and clientSetup what the docker runner's containers say
// in it: the client's name stands for {client}, and the CLI clients' names
// are names --with takes.
const (
	clientSetupEnv = "MST_CLIENT_SETUP"
	clientSetup    = "this worker runs in a docker container whose image lacks it: build a worker image that has it with " +
		"`mst runner setup docker --with {client}` (adding the names of the other programs the eval runs there) " +
		"and run in it with the --runner-option image=REF that setup prints"
)

// npmCPUs maps Docker's architecture names to npm's (and Node's).
var npmCPUs = map[string]string{"amd64": "x64", "arm64": "arm64"}

// userlandNames lists the names --with takes.
func userlandNames() string {
	names := make([]string, len(Userlands))
	for i, u := range Userlands {
		names[i] = u.Name
	}
	return strings.Join(names, ", ")
}

// parseWith reads --with values (each a comma-separated list) into the
// parts of one image, in Userlands' order: debian always, node whenever an
// npm package is named.
func parseWith(values []string) ([]Userland, error) {
	want := map[string]bool{"debian": true}
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" {
				continue
			}
			i := slices.IndexFunc(Userlands, func(u Userland) bool { return u.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("docker runner: --with names %q, which is not a part of a worker image MST knows; the known ones are %s (docs/docker.md says what each holds). "+
					"For anything else, build an image of your own and pass --runner-option image=REF", name, userlandNames())
			}
			want[name] = true
			if Userlands[i].NPM != "" {
				want["node"] = true
			}
			if n := Userlands[i].Needs; n != "" {
				want[n] = true
			}
		}
	}
	var parts []Userland
	for _, u := range Userlands {
		if want[u.Name] {
			parts = append(parts, u)
		}
	}
	return parts, nil
}

// userlandImage is the tag of the image of parts for an mst version:
// mst-worker:<version>-debian for Debian alone, else
// mst-worker:<version>-node-… with every part after debian.
func userlandImage(version string, parts []Userland) string {
	var names []string
	for _, u := range parts {
		if u.Name != "debian" {
			names = append(names, u.Name)
		}
	}
	if len(names) == 0 {
		names = []string{"debian"}
	}
	return DefaultImage(version) + "-" + strings.Join(names, "-")
}

// userlandOfTag reads the --with names back from the tag of an image
// setup built for mst version found (userlandImage); ok is false for any
// other image.
func userlandOfTag(ref, found string) (names []string, ok bool) {
	rest, ok := strings.CutPrefix(ref, DefaultImage(found)+"-")
	if !ok {
		return nil, false
	}
	for _, u := range Userlands {
		if rest == u.Name {
			return append(names, u.Name), true
		}
		if r, ok := strings.CutPrefix(rest, u.Name+"-"); ok {
			names, rest = append(names, u.Name), r
		}
	}
	return nil, false
}

// mustParseWith is parseWith of names known to be valid.
func mustParseWith(names []string) []Userland {
	parts, err := parseWith(names)
	if err != nil {
		panic(err)
	}
	return parts
}

// npmSpecs are the npm packages of parts, for a Docker host of arch.
func npmSpecs(parts []Userland, cpu string) []string {
	var specs []string
	for _, u := range parts {
		if u.NPM != "" {
			specs = append(specs, strings.ReplaceAll(u.NPM, "CPU", cpu))
		}
	}
	return specs
}

// setupUserland builds the images of `--with`: the Debian worker image
// (tagged <default image>-debian), the Python image on top of it when
// parts holds python (tagged <default image>-python), the desktop image on
// top of that when parts holds desktop (<default image>-python-desktop),
// and the Node image on top of the last when parts holds node; then, with
// the desktopPackage option, the image of the desktop app on top of all.
// sum is the mst binary's SHA-256, for LabelBinary; the network option is
// the network the Python and desktop images' builds reach a Debian mirror
// on.
func setupUserland(ctx context.Context, c *clicmd.CLI, p runner.SetupParams, parts []Userland, arch, sum string, set settings, out io.Writer, logger *slog.Logger) error {
	network := set.network
	node, python, desktop := hasPart(parts, "node"), hasPart(parts, "python"), hasPart(parts, "desktop")
	var npm, cpu string
	if node {
		var err error
		if npm, cpu, err = findNPM(arch); err != nil {
			return err
		}
	}

	// The Debian worker image.
	dir, err := os.MkdirTemp("", "mst-worker-debian-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := writeContext(dir, p.MST); err != nil {
		return fmt.Errorf("docker runner: preparing the Debian image's build context: %w", err)
	}
	if err := copyEmbedded("images/Dockerfile.debian", filepath.Join(dir, "Dockerfile")); err != nil {
		return err
	}
	fmt.Fprintf(out, "building the Debian worker image FROM %s with %s\n", DebianBase, p.MST)
	id, err := build(ctx, c, dir, "--label", LabelBinary+"="+sum)
	if err != nil {
		if _, missing := c.Run(ctx, nil, "image", "inspect", "--format", "{{.Id}}", DebianBase); missing != nil {
			return fmt.Errorf("docker runner: building the Debian worker image: its Dockerfile starts FROM %s, which the Docker host does not have and could not pull: "+
				"docker pull %s where a registry is reachable, or build it offline with mmdebstrap (see docs/docker.md, \"Worker images with a userland\"): %w", DebianBase, DebianBase, err)
		}
		return fmt.Errorf("docker runner: building the Debian worker image: %w", err)
	}
	version, err := imageVersion(ctx, c, id, DefaultMST)
	if err != nil {
		return fmt.Errorf("docker runner: the Debian worker image does not run mst: %w", err)
	}
	debian := userlandImage(version, parts[:1])
	if err := retag(ctx, c, id, debian, logger); err != nil {
		return err
	}
	ref, final := debian, id
	if python {
		ref = userlandImage(version, partsNamed(parts, "debian", "python"))
		if final, err = buildPython(ctx, c, debian, sum, network, out); err != nil {
			return err
		}
		if err := retag(ctx, c, final, ref, logger); err != nil {
			return err
		}
	}
	if desktop {
		base := ref
		ref = userlandImage(version, partsNamed(parts, "debian", "python", "desktop"))
		if final, err = buildDesktop(ctx, c, base, sum, network, out); err != nil {
			return err
		}
		if err := retag(ctx, c, final, ref, logger); err != nil {
			return err
		}
	}
	if node {
		base := ref
		ref = userlandImage(version, parts)
		if final, err = buildNode(ctx, c, npm, cpu, base, parts, sum, out); err != nil {
			return err
		}
		if err := retag(ctx, c, final, ref, logger); err != nil {
			return err
		}
	}
	about, err := checkUserland(ctx, c, final, parts)
	if err != nil {
		return fmt.Errorf("docker runner: the image %s: %w", ref, err)
	}
	if set.desktopPackage != "" {
		fmt.Fprintf(out, "built %s (%s) with mst %s%s\n", ref, shortID(final), version, about)
		base := ref
		ref = desktopAppImage(ref, set.desktopPackage)
		if final, err = buildDesktopApp(ctx, c, base, set, out); err != nil {
			return err
		}
		if err := retag(ctx, c, final, ref, logger); err != nil {
			return err
		}
		if about, err = checkDesktopAppImage(ctx, c, final, set.desktopApp); err != nil {
			return fmt.Errorf("docker runner: the image %s: %w", ref, err)
		}
	}
	fmt.Fprintf(out, "built %s (%s) with mst %s%s\n", ref, shortID(final), version, about)
	fmt.Fprintf(out, "run in it with: mst run EVAL --runner docker --runner-option image=%s\n", ref)
	return nil
}

// findNPM finds the npm that installs the Node image's packages, and
// npm's name for the Docker host's architecture. npm runs here, and some
// packages (Claude Code's) pick their native binary by the platform npm
// runs on, so this machine must be the Docker host's platform.
func findNPM(arch string) (npm, cpu string, err error) {
	cpu, ok := npmCPUs[arch]
	if !ok {
		return "", "", fmt.Errorf("docker runner: the Docker host runs %s, and MST's Node images are built for amd64 and arm64 only: build an image of your own and pass --runner-option image=REF", arch)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != arch {
		return "", "", fmt.Errorf("docker runner: the Node image's npm packages are installed on this machine (%s/%s), and native ones must match the Docker host (linux/%s): "+
			"run `mst runner setup docker --with …` on a linux/%s machine that reaches the Docker host, or build an image of your own and pass --runner-option image=REF",
			runtime.GOOS, runtime.GOARCH, arch, arch)
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		return "", "", errors.New("docker runner: --with node and the npm packages need npm on this machine: setup installs them here and copies them into the image. Install Node.js with npm (Debian: apt-get install npm) and run setup again")
	}
	return npm, cpu, nil
}

// hasPart reports whether parts holds the part named name.
func hasPart(parts []Userland, name string) bool {
	return slices.ContainsFunc(parts, func(u Userland) bool { return u.Name == name })
}

// partsNamed is the parts of parts that names names, in parts' order:
// those of an image built on the way.
func partsNamed(parts []Userland, names ...string) []Userland {
	var out []Userland
	for _, u := range parts {
		if slices.Contains(names, u.Name) {
			out = append(out, u)
		}
	}
	return out
}

// buildPython builds the Python image on top of the image base, with the
// network network ("" for Docker's default), and returns its id.
func buildPython(ctx context.Context, c *clicmd.CLI, base, sum, network string, out io.Writer) (string, error) {
	fmt.Fprintf(out, "building the Python worker image on %s with Debian's python3 (apt needs a Debian mirror)\n", base)
	id, err := buildOn(ctx, c, "images/Dockerfile.python", base, network, nil, "--label", LabelBinary+"="+sum)
	if err != nil {
		return "", fmt.Errorf("docker runner: building the Python worker image, which installs python3 from Debian's packages with apt: %w. "+
			"Its build needs a Debian mirror: if the Docker host's builds cannot reach one on Docker's default network, pass the network they can with --runner-option %s=NAME (such as host)", err, OptionNetwork)
	}
	return id, nil
}

// buildOn builds the image of the embedded Dockerfile dockerfile on top of
// the image base, with the network network ("" for Docker's default) and
// the extra docker build arguments, and returns its id. fill, when not
// nil, adds the rest of the build context to the folder it is given.
func buildOn(ctx context.Context, c *clicmd.CLI, dockerfile, base, network string, fill func(dir string) error, extra ...string) (string, error) {
	dir, err := os.MkdirTemp("", "mst-worker-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := copyEmbedded(dockerfile, filepath.Join(dir, "Dockerfile")); err != nil {
		return "", err
	}
	if fill != nil {
		if err := fill(dir); err != nil {
			return "", err
		}
	}
	args := append([]string{"--build-arg", "BASE=" + base}, extra...)
	if network != "" {
		args = append(args, "--network", network)
	}
	return build(ctx, c, dir, args...)
}

// buildNode installs the npm packages of parts into a build context and
// builds the Node image on top of the image base; it returns its id.
func buildNode(ctx context.Context, c *clicmd.CLI, npm, cpu, base string, parts []Userland, sum string, out io.Writer) (string, error) {
	dir, err := os.MkdirTemp("", "mst-worker-node-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := copyEmbedded("images/Dockerfile.node", filepath.Join(dir, "Dockerfile")); err != nil {
		return "", err
	}
	specs := npmSpecs(parts, cpu)
	fmt.Fprintf(out, "installing %s with npm on this machine\n", strings.Join(specs, " "))
	args := append([]string{"install", "--global", "--prefix", filepath.Join(dir, "npm"),
		"--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error",
		"--os=linux", "--cpu=" + cpu, "--libc=glibc"}, specs...)
	cmd := exec.CommandContext(ctx, npm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker runner: npm install %s failed (%v): %s", strings.Join(specs, " "), err, strings.TrimSpace(stderr.String()))
	}
	fmt.Fprintf(out, "building the Node worker image on %s\n", base)
	id, err := build(ctx, c, dir, "--build-arg", "BASE="+base, "--label", LabelBinary+"="+sum)
	if err != nil {
		return "", fmt.Errorf("docker runner: building the Node worker image: %w", err)
	}
	return id, nil
}

// checkUserland runs node and python3 and looks up each part's commands in
// the image, so an image that setup tags can run what it was built for.
// It returns what it found, for setup's last line.
func checkUserland(ctx context.Context, c *clicmd.CLI, id string, parts []Userland) (string, error) {
	var script strings.Builder
	script.WriteString("set -e; test -x /usr/bin/env; tar --version >/dev/null")
	for _, u := range parts {
		for _, cmd := range u.Commands {
			fmt.Fprintf(&script, "; command -v %s >/dev/null || { echo 'no %s on PATH' >&2; exit 1; }", cmd, cmd)
		}
	}
	// One line each: Node's version, then Python's (with venv, which
	// makes a virtual environment for a server's packages).
	node, python, desktop := hasPart(parts, "node"), hasPart(parts, "python"), hasPart(parts, "desktop")
	if node {
		script.WriteString("; node --version")
	}
	if desktop {
		// GTK 3 for Python, for stand-in apps and checks.
		script.WriteString(`; python3 -c 'import gi; gi.require_version("Gtk", "3.0")'`)
	}
	if python {
		script.WriteString("; python3 -c 'import ensurepip, venv, platform; print(platform.python_version())'")
	}
	run := []string{"run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", id, "-c", script.String()}
	if desktop {
		// The checks run on the desktop, as the runner starts it: the
		// session script comes up (or says why not), then runs them.
		run = []string{"run", "--rm", "--network", "none", "--tmpfs", "/tmp:rw,mode=1777", "--security-opt", "no-new-privileges",
			"--entrypoint", desktopSession, id, "/bin/sh", "-c", script.String()}
	}
	got, err := c.Run(ctx, nil, run...)
	if err != nil {
		return "", err
	}
	lines := strings.Split(got, "\n")
	var about []string
	if node {
		if v := lines[0]; !strings.HasPrefix(v, "v22.") {
			return "", fmt.Errorf("its node is %q, want Node 22", v)
		}
		about, lines = append(about, "node "+lines[0]), lines[1:]
	}
	if python {
		if v := lines[len(lines)-1]; !strings.HasPrefix(v, "3.") {
			return "", fmt.Errorf("its python3 printed %q, want a Python 3 version", v)
		}
		about = append(about, "python "+lines[len(lines)-1])
	}
	if desktop {
		about = append(about, "a desktop (Xvfb, D-Bus, keyring, AT-SPI) that comes up")
	}
	for _, u := range parts {
		if u.NPM != "" && u.Name != "node" {
			about = append(about, u.Name)
		}
	}
	if len(about) == 0 {
		return "", nil
	}
	return ", " + strings.Join(about, ", "), nil
}

// build runs a quiet docker build of dir with extra arguments, and returns
// the image's id: the last line a quiet build prints (the legacy builder
// may print a deprecation notice first, on stderr).
func build(ctx context.Context, c *clicmd.CLI, dir string, extra ...string) (string, error) {
	args := append(append([]string{"build", "--quiet"}, extra...), dir)
	id, err := c.Run(ctx, nil, args...)
	if err != nil {
		return "", err
	}
	if i := strings.LastIndexByte(id, '\n'); i >= 0 {
		id = id[i+1:]
	}
	return id, nil
}

// retag tags the image id as ref, and removes the image that ref named
// before when nothing else uses it.
func retag(ctx context.Context, c *clicmd.CLI, id, ref string, logger *slog.Logger) error {
	previous, _ := c.Run(ctx, nil, "image", "inspect", "--format", "{{.Id}}", ref)
	if _, err := c.Run(ctx, nil, "tag", id, ref); err != nil {
		return fmt.Errorf("docker runner: tagging the image %s: %w", ref, err)
	}
	if previous != "" && previous != id {
		// Docker refuses to remove it while a container (a kept one, say)
		// or a child image still uses it.
		if _, err := c.Run(ctx, nil, "image", "rm", previous); err != nil {
			logger.Debug("the previous image stays", "image", previous, "ref", ref, "err", err)
		}
	}
	return nil
}

func copyEmbedded(name, dst string) error {
	b, err := userlandFiles.ReadFile(name)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
