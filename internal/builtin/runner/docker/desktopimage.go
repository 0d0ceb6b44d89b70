package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
)

// The desktop images `mst runner setup docker` builds: the desktop worker
// image (--with desktop, images/Dockerfile.desktop) on the Python image,
// and, with the desktopPackage and desktopApp options, an app's image on
// top of it (images/Dockerfile.desktop-app). Both install Debian packages
// with apt, so their builds reach a Debian mirror on the network option's
// network.

// desktopScripts are the desktop image's scripts, in images/desktop/.
var desktopScripts = []string{"mst-desktop-session", "mst-desktop-restart"}

// buildDesktop builds the desktop worker image on top of the image base
// (the Python image), with the network network ("" for Docker's default),
// and returns its id.
func buildDesktop(ctx context.Context, c *clicmd.CLI, base, sum, network string, out io.Writer) (string, error) {
	scripts := func(dir string) error {
		for _, s := range desktopScripts {
			if err := copyEmbedded("images/desktop/"+s, filepath.Join(dir, s)); err != nil {
				return err
			}
			// COPY keeps the mode; embedded files have none.
			if err := os.Chmod(filepath.Join(dir, s), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(out, "building the desktop worker image on %s with Xvfb, D-Bus, AT-SPI, gnome-keyring and x11vnc (apt needs a Debian mirror)\n", base)
	id, err := buildOn(ctx, c, "images/Dockerfile.desktop", base, network, scripts, "--label", LabelBinary+"="+sum)
	if err != nil {
		return "", fmt.Errorf("docker runner: building the desktop worker image, which installs Debian's packages with apt: %w. "+
			"Its build needs a Debian mirror: if the Docker host's builds cannot reach one on Docker's default network, pass the network they can with --runner-option %s=NAME (such as host)", err, OptionNetwork)
	}
	return id, nil
}

// validateDesktopApp checks setup's desktopPackage and desktopApp options,
// which go together: a Debian package that exists here, and a command.
func validateDesktopApp(set settings) error {
	switch {
	case set.desktopPackage == "":
		return fmt.Errorf("docker runner: --runner-option %s=%q names the command of an app that %s installs: give both, or build an image of your own (docs/desktop.md)", OptionDesktopApp, set.desktopApp, OptionDesktopPackage)
	case strings.TrimSpace(set.desktopApp) == "":
		return fmt.Errorf("docker runner: --runner-option %s=%s: give the command line that starts the app too, as --runner-option %s='COMMAND' (it becomes MST_DESKTOP_APP; docs/desktop.md)", OptionDesktopPackage, set.desktopPackage, OptionDesktopApp)
	case set.image != "":
		return fmt.Errorf("docker runner: --runner-option %s builds an image on MST's desktop image and --runner-option image=%s names one built already: give one or the other", OptionDesktopPackage, set.image)
	}
	st, err := os.Stat(set.desktopPackage)
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("docker runner: --runner-option %s=%s: no such package file here: name the app's .deb on this machine", OptionDesktopPackage, set.desktopPackage)
	}
	if !strings.HasSuffix(set.desktopPackage, ".deb") {
		return fmt.Errorf("docker runner: --runner-option %s=%s: the desktop image is Debian, and installs the app from a Debian package (.deb)", OptionDesktopPackage, set.desktopPackage)
	}
	return nil
}

var notTagChar = regexp.MustCompile(`[^a-z0-9._-]+`)

// desktopAppImage is the tag of the app's image on top of the desktop
// image base: base-app-NAME, NAME the package's, from its file name
// (claude-desktop_1.2.3_amd64.deb is claude-desktop).
func desktopAppImage(base, pkg string) string {
	name, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(pkg), ".deb"), "_")
	name = strings.Trim(notTagChar.ReplaceAllString(strings.ToLower(name), "-"), "-._")
	if name == "" {
		name = "app"
	}
	tag := base + "-app-" + name
	// A tag is at most 128 characters.
	if _, t, ok := strings.Cut(tag, ":"); ok && len(t) > 128 {
		tag = tag[:len(tag)-(len(t)-128)]
	}
	return tag
}

// buildDesktopApp builds the app's image on top of the desktop image base
// and returns its id.
func buildDesktopApp(ctx context.Context, c *clicmd.CLI, base string, set settings, out io.Writer) (string, error) {
	pkg := func(dir string) error {
		if err := copyFile(set.desktopPackage, filepath.Join(dir, "app.deb"), 0o644); err != nil {
			return fmt.Errorf("docker runner: copying %s into the build context: %w", set.desktopPackage, err)
		}
		return nil
	}
	fmt.Fprintf(out, "building the app's image on %s with %s, started by %q\n", base, set.desktopPackage, set.desktopApp)
	id, err := buildOn(ctx, c, "images/Dockerfile.desktop-app", base, set.network, pkg, "--build-arg", "APP="+set.desktopApp)
	if err != nil {
		return "", fmt.Errorf("docker runner: building the app's image, which installs %s with apt (and its dependencies from a Debian mirror: --runner-option %s=NAME names the build's network): %w",
			set.desktopPackage, OptionNetwork, err)
	}
	return id, nil
}

// checkDesktopAppImage checks that the program app's command line starts
// is on the image's PATH, and returns what setup says of the image.
func checkDesktopAppImage(ctx context.Context, c *clicmd.CLI, id, app string) (string, error) {
	// The first word that is no shell keyword or variable assignment.
	const script = `set -f; set -- $MST_DESKTOP_APP
while [ $# -gt 0 ]; do case $1 in exec|env|nohup|*=*) shift ;; *) break ;; esac; done
[ $# -gt 0 ] && command -v "$1" >/dev/null || { echo "the app's command line starts no program on PATH: $MST_DESKTOP_APP" >&2; exit 1; }`
	if _, err := c.Run(ctx, nil, "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", id, "-c", script); err != nil {
		return "", err
	}
	return fmt.Sprintf(", a desktop, and the app started by %q", app), nil
}
