package ssh

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"regexp"
	"runtime"
	"strings"
)

// localMST is the mst binary that runs the coordinator: the one copied to
// hosts, and the version every worker must report.
type localMST struct {
	// path is the binary's file.
	path string
	// version is what `mst version` prints, such as "mst 1.2.0".
	version string
	goos    string
	goarch  string
	// hash is the start of the binary's SHA-256, so two builds that
	// report the same version are still told apart on a host.
	hash string
}

// inspectLocal hashes the coordinator's mst binary and learns its version:
// version (Params.MSTVersion) when it is given, else what `mst version`
// prints.
func inspectLocal(ctx context.Context, mst []string, version string) (*localMST, error) {
	if len(mst) == 0 {
		return nil, errors.New("no mst command to start workers with")
	}
	l := &localMST{path: mst[0], version: "mst " + version, goos: runtime.GOOS, goarch: runtime.GOARCH}
	if version == "" {
		cmd := exec.CommandContext(ctx, mst[0], append(append([]string(nil), mst[1:]...), "version")...)
		// A binary that dispatches on its name (a test binary) sees "mst",
		// as on the hosts.
		cmd.Args[0] = "mst"
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("running %s version: %w", mst[0], err)
		}
		l.version = strings.TrimSpace(string(out))
	}
	f, err := os.Open(mst[0])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("reading %s: %w", mst[0], err)
	}
	l.hash = hex.EncodeToString(h.Sum(nil))[:12]
	return l, nil
}

// installDir is the folder on a host, under binDir, that holds this build
// of mst.
func (l *localMST) installDir() string {
	v := strings.TrimPrefix(l.version, "mst ")
	return binDir + "/" + unsafeChars.ReplaceAllString(v, "_") + "-" + l.goos + "-" + l.goarch + "-" + l.hash
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._+-]`)

// hostInfo is what MST learns about a host when it first logs in.
type hostInfo struct {
	home   string
	goos   string
	goarch string
	// mst is the path of the mst the host's workers run.
	mst string
}

// probe reads a host's HOME and `uname -sm` in one command.
func probe(ctx context.Context, r remote) (hostInfo, error) {
	out, err := output(ctx, r, `printf '%s\n' "$HOME" && uname -sm`)
	if err != nil {
		return hostInfo{}, fmt.Errorf("reading HOME and uname -sm on %s (MST needs a POSIX shell there): %w", r.name(), err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !path.IsAbs(lines[0]) {
		return hostInfo{}, fmt.Errorf("reading HOME and uname -sm on %s: unexpected output %q", r.name(), out)
	}
	goos, goarch := platform(lines[len(lines)-1])
	return hostInfo{home: lines[0], goos: goos, goarch: goarch}, nil
}

// platform turns `uname -sm` output ("Linux x86_64") into Go's names
// ("linux", "amd64"). Names it does not know are passed on lowercased.
func platform(uname string) (goos, goarch string) {
	f := strings.Fields(uname)
	if len(f) < 2 {
		return strings.ToLower(uname), ""
	}
	goos = strings.ToLower(f[0])
	arch := strings.ToLower(f[len(f)-1])
	switch arch {
	case "x86_64", "amd64":
		arch = "amd64"
	case "aarch64", "arm64", "aarch64_be":
		arch = "arm64"
	case "i386", "i486", "i586", "i686", "x86":
		arch = "386"
	case "armv5l", "armv6l", "armv7l", "armv8l", "arm":
		arch = "arm"
	}
	return goos, arch
}

// ensureMST makes sure the host has an mst of the coordinator's version
// and returns its path. With given set (the mst option), it checks that
// program; otherwise it copies this binary to its installDir, unless an
// earlier run already put it there.
func ensureMST(ctx context.Context, r remote, info hostInfo, l *localMST, given string) (string, error) {
	if given != "" {
		p := hostPath(given, info.home)
		got, err := output(ctx, r, quote(p)+" version")
		if err != nil {
			return "", fmt.Errorf("running %s version on %s: %w: install mst %s there, or leave out --runner-option mst to have MST copy itself", p, r.name(), err, strings.TrimPrefix(l.version, "mst "))
		}
		if got = strings.TrimSpace(got); got != l.version {
			return "", fmt.Errorf("%s on %s is %q, and this mst is %q: workers must run the coordinator's version: install %s there, or leave out --runner-option mst to have MST copy itself", p, r.name(), got, l.version, strings.TrimPrefix(l.version, "mst "))
		}
		return p, nil
	}
	if info.goos != l.goos || info.goarch != l.goarch {
		return "", fmt.Errorf("host %s is %s/%s; this mst is %s/%s: install mst %s there and pass --runner-option mst=PATH",
			r.name(), info.goos, info.goarch, l.goos, l.goarch, strings.TrimPrefix(l.version, "mst "))
	}
	dir := hostPath(l.installDir(), info.home)
	bin := path.Join(dir, "mst")
	if got, err := output(ctx, r, "test -x "+quote(bin)+" && "+quote(bin)+" version"); err == nil && strings.TrimSpace(got) == l.version {
		return bin, nil
	}
	f, err := os.Open(l.path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var suffix [4]byte
	rand.Read(suffix[:])
	tmp := path.Join(dir, ".mst-"+hex.EncodeToString(suffix[:]))
	// Written under a temporary name and renamed, so a run on the same
	// host at the same time never starts half a binary.
	cmd := "mkdir -p " + quote(dir) + " && cat > " + quote(tmp) + " && chmod 755 " + quote(tmp) + " && mv -f " + quote(tmp) + " " + quote(bin)
	if err := r.run(ctx, cmd, f, nil, nil); err != nil {
		output(context.WithoutCancel(ctx), r, "rm -f "+quote(tmp))
		return "", fmt.Errorf("copying mst to %s:%s: %w", r.name(), bin, err)
	}
	got, err := output(ctx, r, quote(bin)+" version")
	if err != nil {
		return "", fmt.Errorf("running the copied mst on %s: %w", r.name(), err)
	}
	if got = strings.TrimSpace(got); got != l.version {
		return "", fmt.Errorf("the mst copied to %s:%s says %q, want %q", r.name(), bin, got, l.version)
	}
	return bin, nil
}
