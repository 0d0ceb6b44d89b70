package docker

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/runner"
)

// dockerfile is the worker image's Dockerfile.
//
//go:embed Dockerfile
var dockerfile []byte

// image is a worker image: how the run named it, the id it pinned and
// what the Docker host knows of it.
type image struct {
	ref string
	id  string
	// digest is the registry's digest of the image (sha256:…, from its
	// RepoDigests), "" for an image built or loaded on the Docker host.
	digest string
	// binary is the image's LabelBinary, "" when it has none.
	binary string
	// desktop is true for a desktop image (LabelDesktop, desktop.go).
	desktop bool
}

// String is what run.json records: the image's name pinned by digest,
// NAME@sha256:…, with the registry's digest when the image came from one
// (so the same image can be pulled anywhere) and else the local image id.
func (i image) String() string {
	name, _, _ := strings.Cut(i.ref, "@")
	d := i.digest
	if d == "" {
		d = i.id
	}
	return name + "@" + d
}

// inspected is what resolveImage reads of `docker image inspect`. Every
// field may be missing: an image of one's own need not carry MST's
// labels, and one built here has no RepoDigests.
type inspected struct {
	ID          string   `json:"Id"`
	RepoDigests []string `json:"RepoDigests"`
	Config      *struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

// parseInspect reads the output of `docker image inspect ref` (a JSON
// array of one image) into an image.
func parseInspect(ref string, out []byte) (image, error) {
	var list []inspected
	if err := json.Unmarshal(out, &list); err != nil {
		return image{}, fmt.Errorf("docker image inspect %s printed what is not an image's JSON: %w", ref, err)
	}
	if len(list) != 1 || list[0].ID == "" {
		return image{}, fmt.Errorf("docker image inspect %s printed %d images, want one with an id", ref, len(list))
	}
	in := list[0]
	img := image{ref: ref, id: in.ID, digest: repoDigest(ref, in.RepoDigests)}
	if in.Config != nil {
		img.binary = in.Config.Labels[LabelBinary]
		img.desktop, _ = strconv.ParseBool(in.Config.Labels[LabelDesktop])
	}
	return img, nil
}

// repoDigest picks, from an image's RepoDigests (NAME@sha256:…), the
// digest under ref's repository, or the first one when none is; "" when
// the image has none.
func repoDigest(ref string, digests []string) string {
	want := repository(ref)
	first := ""
	for _, d := range digests {
		name, digest, ok := strings.Cut(d, "@")
		if !ok || digest == "" {
			continue
		}
		if repository(name) == want {
			return digest
		}
		if first == "" {
			first = digest
		}
	}
	return first
}

// repository is an image reference's repository, without tag or digest,
// in one spelling for Docker Hub's names: busybox, library/busybox and
// docker.io/library/busybox:1 are all busybox.
func repository(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	for _, p := range []string{"docker.io/", "index.docker.io/", "library/"} {
		name = strings.TrimPrefix(name, p)
	}
	return name
}

// DefaultImage is the reference of the worker image Setup builds for an
// MST version (runner.WorkerImage).
func DefaultImage(version string) string { return runner.WorkerImage(version) }

// resolveImage finds the run's image on the Docker host: ref, or the
// default image of version when ref is "".
func resolveImage(ctx context.Context, c *clicmd.CLI, ref, version string) (image, error) {
	own := ref != ""
	if !own {
		ref = DefaultImage(version)
	}
	// The whole JSON, not a --format template: a template that names a
	// label fails on an image without labels.
	out, err := c.Run(ctx, nil, "image", "inspect", ref)
	if err != nil {
		if !says(err, "No such image") && !says(err, "No such object") {
			return image{}, fmt.Errorf("docker runner: looking up the image %s: %w", ref, err)
		}
		if own {
			return image{}, fmt.Errorf("docker runner: the image %s is not on the Docker host: build or pull it there first (docker pull %s)", ref, ref)
		}
		return image{}, fmt.Errorf("docker runner: the worker image %s is not built: run `mst runner setup docker` once (it builds the image from this mst binary), or pass --runner-option image=REF", ref)
	}
	img, err := parseInspect(ref, []byte(out))
	if err != nil {
		return image{}, fmt.Errorf("docker runner: looking up the image %s: %w", ref, err)
	}
	return img, nil
}

// checkVersion runs the mst at path mst in the image, checks that it is
// mst version (any version when version is ""), and returns its version. Its error says what was found and how to get the right
// mst into the image.
func checkVersion(ctx context.Context, c *clicmd.CLI, img image, mst, version, arch string) (found string, err error) {
	found, err = imageVersion(ctx, c, img.id, mst)
	var printed notMST
	switch {
	case errors.As(err, &printed):
		return "", fmt.Errorf("docker runner: %s in the image %s is not mst: `%s version` printed %q. %s", mst, img.ref, mst, string(printed), noMSTHelp(mst, version, arch))
	case err != nil && (says(err, "no such file") || says(err, "executable file not found")):
		// Docker's own words add nothing; a dynamically linked program
		// whose C library the image lacks fails the same way.
		return "", fmt.Errorf("docker runner: the image %s has no mst at %s (or one linked dynamically, whose C library the image lacks). %s", img.ref, mst, noMSTHelp(mst, version, arch))
	case err != nil:
		return "", fmt.Errorf("docker runner: the image %s has no mst at %s that runs (%v). %s", img.ref, mst, err, noMSTHelp(mst, version, arch))
	case version != "" && found != version:
		return "", errors.New("docker runner: " + mismatch(img.ref, mst, found, version, arch))
	}
	return found, nil
}

// mismatch says that the image holds another mst than the coordinator's,
// and what to do about it.
func mismatch(ref, mst, found, version, arch string) string {
	if names, ok := userlandOfTag(ref, found); ok {
		return fmt.Sprintf("the image %s holds mst %s, and this coordinator is mst %s: the workers must run the coordinator's version. "+
			"Build the same image for this version with `mst runner setup docker --with %s` and pass --runner-option image=%s",
			ref, found, version, strings.Join(names, ","), userlandImage(version, mustParseWith(names)))
	}
	return fmt.Sprintf("the image %s holds mst %s at %s, and this coordinator is mst %s: the workers must run the coordinator's version. "+
		"Build the worker image of this version with `mst runner setup docker` and leave out --runner-option image, "+
		"or put mst %s in your image (%s) and name its path with --runner-option mst=PATH",
		ref, found, mst, version, version, buildHint(arch))
}

// noMSTHelp says how to give an image a runnable mst.
func noMSTHelp(mst, version, arch string) string {
	v := "mst"
	if version != "" {
		v = "mst " + version
	}
	return fmt.Sprintf("Put %s in the image (%s) and name its path with --runner-option mst=PATH when it is not %s, "+
		"or use the worker image `mst runner setup docker` builds (leave out --runner-option image)", v, buildHint(arch), mst)
}

// buildHint says how to build an mst that runs in any Linux image of arch.
func buildHint(arch string) string {
	return fmt.Sprintf("a static build runs in any image: CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o mst ./cmd/mst, then COPY mst /usr/local/bin/mst in its Dockerfile", arch)
}

// warnStale warns when the coordinator's mst could have been the binary in
// the worker image (it is a static Linux build for the daemon's
// architecture) but is not: the image is older than this binary, and its
// workers may behave differently though they report the same version.
func warnStale(img image, exe, arch string, logger *slog.Logger) {
	if img.binary == "" || checkStatic(exe, arch) != nil {
		return
	}
	sum, err := fileSHA256(exe)
	if err != nil || sum == img.binary {
		return
	}
	logger.Warn("the worker image was built from another mst binary than this one: run `mst runner setup docker` to rebuild it (with the same --with list for an image with a userland)", "image", img.ref)
}

// Setup builds the worker image from the mst binary p.MST: a static Linux
// binary for the Docker host's architecture. With p.With it builds the
// Debian worker image and, for node and npm packages, a Node image on top
// of it instead (userland.go). With the image option it builds nothing,
// and checks that the image holds a runnable mst.
func Setup(ctx context.Context, p runner.SetupParams) error {
	set, err := parseSettings(p.Options)
	if err != nil {
		return err
	}
	with := p.With
	if set.desktopPackage != "" || set.desktopApp != "" {
		if err := validateDesktopApp(set); err != nil {
			return err
		}
		with = append(slices.Clone(with), "desktop")
	}
	var parts []Userland
	if len(with) > 0 {
		if parts, err = parseWith(with); err != nil {
			return err
		}
		if set.image != "" {
			return fmt.Errorf("docker runner: --with builds a worker image and --runner-option image=%s names one built already: give one or the other", set.image)
		}
	}
	out, logger := p.Out, p.Logger
	if out == nil {
		out = io.Discard
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, err := findCLI()
	if err != nil {
		return err
	}
	goos, arch, err := platform(ctx, c)
	if err != nil {
		return err
	}
	if set.image != "" {
		img, err := resolveImage(ctx, c, set.image, p.MSTVersion)
		if err != nil {
			return err
		}
		found, err := checkVersion(ctx, c, img, set.mst, p.MSTVersion, arch)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "the image %s holds mst %s at %s; nothing to build\n", set.image, found, set.mst)
		return nil
	}
	if p.MST == "" {
		return errors.New("docker runner: no mst binary to put in the worker image")
	}
	if err := checkStatic(p.MST, arch); err != nil {
		return err
	}
	sum, err := fileSHA256(p.MST)
	if err != nil {
		return err
	}
	if parts != nil {
		return setupUserland(ctx, c, p, parts, arch, sum, set, out, logger)
	}
	dir, err := os.MkdirTemp("", "mst-worker-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := writeContext(dir, p.MST); err != nil {
		return fmt.Errorf("docker runner: preparing the image's build context: %w", err)
	}
	fmt.Fprintf(out, "building the worker image from %s (%s/%s)\n", p.MST, goos, arch)
	// The image id is the last line a quiet build prints (the legacy
	// builder may print a deprecation notice first, on stderr).
	id, err := c.Run(ctx, nil, "build", "--quiet", "--label", LabelBinary+"="+sum, dir)
	if err != nil {
		return fmt.Errorf("docker runner: building the worker image: %w", err)
	}
	if i := strings.LastIndexByte(id, '\n'); i >= 0 {
		id = id[i+1:]
	}
	version, err := imageVersion(ctx, c, id, DefaultMST)
	if err != nil {
		return fmt.Errorf("docker runner: the worker image does not run mst: %w", err)
	}
	ref := DefaultImage(version)
	previous, _ := c.Run(ctx, nil, "image", "inspect", "--format", "{{.Id}}", ref)
	if _, err := c.Run(ctx, nil, "tag", id, ref); err != nil {
		return fmt.Errorf("docker runner: tagging the worker image: %w", err)
	}
	if previous != "" && previous != id {
		// The image this one replaces has no tag left; Docker refuses to
		// remove it while a container (a kept one, say) still uses it.
		if _, err := c.Run(ctx, nil, "image", "rm", previous); err != nil {
			logger.Debug("the previous worker image stays", "image", previous, "err", err)
		}
	}
	fmt.Fprintf(out, "built %s (%s) with mst %s\n", ref, shortID(id), version)
	return nil
}

// writeContext fills a build context: the Dockerfile, the mst binary and a
// CA certificate bundle.
func writeContext(dir, mst string) error {
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), dockerfile, 0o644); err != nil {
		return err
	}
	if err := copyFile(mst, filepath.Join(dir, "mst"), 0o755); err != nil {
		return err
	}
	var certs []byte
	for _, p := range caBundles {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			certs = b
			break
		}
	}
	return os.WriteFile(filepath.Join(dir, "ca-certificates.crt"), certs, 0o644)
}

// caBundles are where Linux distributions and macOS keep a PEM bundle of
// the system's CA certificates.
var caBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // macOS, Alpine
}

// imageVersion runs `mst version` in a throwaway container of the image and
// returns the version it prints; a program that prints something else is
// a notMST error.
func imageVersion(ctx context.Context, c *clicmd.CLI, ref, mst string) (string, error) {
	out, err := c.Run(ctx, nil, "run", "--rm", "--network", "none", "--entrypoint", mst, ref, "version")
	if err != nil {
		return "", err
	}
	version, ok := strings.CutPrefix(out, "mst ")
	if !ok || version == "" || strings.ContainsAny(version, " \n") {
		return "", notMST(out)
	}
	return version, nil
}

// notMST is what a program that is not mst printed to `version`.
type notMST string

func (n notMST) Error() string { return fmt.Sprintf("it printed %q, not mst's version", string(n)) }

// elfMachines maps Docker's architecture names to ELF machines.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// checkStatic reports whether path is a static Linux executable for arch
// (a Docker architecture name such as amd64); its error says how to build
// one.
func checkStatic(path, arch string) error {
	howTo := fmt.Sprintf("build one with `CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o bin/linux-%s/ ./cmd/mst` and run `mst runner setup docker --mst bin/linux-%s/mst`", arch, arch, arch)
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("docker runner: %s is not a Linux binary, and the worker image needs a static linux/%s mst: %s", path, arch, howTo)
	}
	defer f.Close()
	if want, ok := elfMachines[arch]; ok && f.Machine != want {
		return fmt.Errorf("docker runner: %s is built for %s, and the Docker host runs %s: %s", path, f.Machine, arch, howTo)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("docker runner: %s is linked dynamically, and the worker image has no C library: %s", path, howTo)
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// shortID is the first 12 hex digits of an image id, as docker prints it.
func shortID(id string) string {
	s := strings.TrimPrefix(id, "sha256:")
	return s[:min(len(s), 12)]
}
