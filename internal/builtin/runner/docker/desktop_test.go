package docker_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/runner/docker"
	"github.com/mst-eval/mst/internal/testkit/testneed"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/runnertest"
)

// desktopImages are the desktop worker image and a stand-in app's image on
// top of it, built once through Setup.
var desktopImages struct {
	once         sync.Once
	err          error
	desktop, app string
	// took is how long Setup took; size the desktop image's size.
	took time.Duration
	size int64
}

// standinApp is the stand-in desktop app its Debian package installs as
// /usr/bin/mst-standin: a GTK 3 window whose accessible tree names it,
// which writes its pid to $HOME/standin.mapped once the window is mapped.
const standinApp = `#!/usr/bin/python3
import os
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk

GLib.set_prgname("mst-standin")
marker = os.path.join(os.environ["HOME"], "standin.mapped")


def mapped(*_):
    with open(marker + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(marker + ".tmp", marker)
    return False


w = Gtk.Window(title="Stand-in Chat")
w.add(Gtk.Label(label="ready"))
w.connect("map-event", mapped)
w.connect("destroy", Gtk.main_quit)
w.show_all()
Gtk.main()
`

// desktopImage builds, once, the desktop worker image the way a user does
// (`mst runner setup docker --with desktop`, with the desktopPackage and
// desktopApp options for a stand-in app's package) from the static mst.
// Its apt runs on the host's network, as the private dockerd has no
// bridge.
func desktopImage(mst string) {
	desktopImages.once.Do(func() {
		if desktopImages.err = debianBase(); desktopImages.err != nil {
			return
		}
		deb, err := standinPackage()
		if err != nil {
			desktopImages.err = err
			return
		}
		defer os.RemoveAll(filepath.Dir(deb))
		var out bytes.Buffer
		start := time.Now()
		err = docker.Setup(context.Background(), runner.SetupParams{MST: mst, With: []string{"desktop"}, Out: &out, Options: map[string]string{
			docker.OptionNetwork: "host", docker.OptionDesktopPackage: deb, docker.OptionDesktopApp: "mst-standin",
		}})
		desktopImages.took = time.Since(start)
		if err != nil {
			desktopImages.err = fmt.Errorf("Setup --with desktop: %w\n%s", err, out.String())
			return
		}
		desktopImages.desktop = docker.DefaultImage(testVersion) + "-python-desktop"
		desktopImages.app = desktopImages.desktop + "-app-mst-standin"
		for _, want := range []string{"built " + desktopImages.desktop + " ", "a desktop (Xvfb, D-Bus, keyring, AT-SPI) that comes up",
			"built " + desktopImages.app + " ", `the app started by "mst-standin"`, "--runner-option image=" + desktopImages.app} {
			if !strings.Contains(out.String(), want) {
				desktopImages.err = fmt.Errorf("Setup --with desktop printed:\n%s\nwant it to say %q", out.String(), want)
				return
			}
		}
		size, _ := exec.Command("docker", "image", "inspect", "--format", "{{.Size}}", desktopImages.desktop).Output()
		desktopImages.size, _ = strconv.ParseInt(strings.TrimSpace(string(size)), 10, 64)
	})
}

// debianBase makes sure the Docker host has docker.DebianBase. No
// registry is reachable here, so it builds one from Debian's packages
// with mmdebstrap, streamed into docker import; without mmdebstrap the
// test fails under CI and skips elsewhere (through desktopImage's error).
func debianBase() error {
	if exec.Command("docker", "image", "inspect", docker.DebianBase).Run() == nil {
		return nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errMissing("mmdebstrap, which builds the " + docker.DebianBase + " base image from Debian's packages (apt-get install mmdebstrap; scripts/test does it as root)")
	}
	suite, _, _ := strings.Cut(strings.TrimPrefix(docker.DebianBase, "debian:"), "-")
	build := exec.Command("mmdebstrap", "--quiet", "--variant=minbase", suite, "-")
	load := exec.Command("docker", "import", "-", docker.DebianBase)
	pipe, err := build.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	build.Stderr, load.Stdin = &stderr, pipe
	if err := build.Start(); err != nil {
		return err
	}
	out, lerr := load.CombinedOutput()
	if err := build.Wait(); err != nil {
		return fmt.Errorf("mmdebstrap --variant=minbase %s: %v\n%s", suite, err, stderr.String())
	}
	if lerr != nil {
		return fmt.Errorf("docker import %s: %v\n%s", docker.DebianBase, lerr, out)
	}
	return nil
}

// errMissing is a part this machine lacks, which stops the test as
// testneed.Missing does.
type errMissing string

func (e errMissing) Error() string { return "this test needs " + string(e) }

// standinPackage builds the stand-in app's Debian package with dpkg-deb,
// in a folder of its own, and returns its path.
func standinPackage() (string, error) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		return "", errMissing("dpkg-deb, which builds the stand-in app's package (Debian: dpkg)")
	}
	dir, err := os.MkdirTemp("", "mst-standin-")
	if err != nil {
		return "", err
	}
	root := filepath.Join(dir, "root")
	control := "Package: mst-standin\nVersion: 1.0\nArchitecture: all\nMaintainer: MST <mst@example.invalid>\n" +
		"Depends: python3-gi, gir1.2-gtk-3.0\nDescription: a stand-in desktop app for MST's tests\n"
	for name, body := range map[string]string{"DEBIAN/control": control, "usr/bin/mst-standin": standinApp} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			return "", err
		}
	}
	deb := filepath.Join(dir, "mst-standin_1.0_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb, nil
}

// needDesktop builds the desktop images once (desktopImage) and returns
// the static mst and the two images' references. A missing part
// (mmdebstrap, dpkg-deb) fails the test under CI and skips it elsewhere.
func needDesktop(t *testing.T) (mst, desktop, app string) {
	t.Helper()
	mst, _ = workerImage(t)
	desktopImage(mst)
	if m, ok := desktopImages.err.(errMissing); ok {
		testneed.Missing(t, m.Error())
	}
	if desktopImages.err != nil {
		t.Fatal(desktopImages.err)
	}
	return mst, desktopImages.desktop, desktopImages.app
}

// a11yApps lists, within a deadline, the applications on the
// accessibility bus and their windows, until one has a window named
// argv[1]; it prints what it found.
const a11yApps = `import sys, time
from gi.repository import Gio, GLib

session = Gio.bus_get_sync(Gio.BusType.SESSION)
address = session.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress",
                            None, GLib.VariantType("(s)"), 0, 5000, None).unpack()[0]
a11y = Gio.DBusConnection.new_for_address_sync(
    address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)


def call(name, path, method, args=None):
    return a11y.call_sync(name, path, "org.a11y.atspi.Accessible" if args is None else "org.freedesktop.DBus.Properties",
                          method, args, None, 0, 5000, None).unpack()[0]


def label(name, path):
    return call(name, path, "Get", GLib.Variant("(ss)", ("org.a11y.atspi.Accessible", "Name")))


deadline = time.monotonic() + 30
while True:
    seen = []
    for name, path in call("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root", "GetChildren"):
        try:
            windows = [label(n, p) for n, p in call(name, path, "GetChildren")]
            seen.append("%s %s" % (label(name, path), windows))
        except GLib.Error:
            continue
        if sys.argv[1] in windows:
            print(seen[-1])
            sys.exit(0)
    if time.monotonic() > deadline:
        print("no window %r on the accessibility bus within 30s; its applications: %s" % (sys.argv[1], seen))
        sys.exit(1)
    time.sleep(0.1)
`

// TestDesktopImage builds the desktop image and a stand-in app's image on
// it, starts a container of the app's image as the runner does, with the
// live view, and checks from docker exec, as the desktop user, what a
// desktop client needs: the display, the session and accessibility
// buses, the unlocked keyring, a writable managed-settings file,
// MST_DESKTOP_RESTART starting and replacing the app (whose window then
// shows on the accessibility bus), no-new-privileges, and the view's RFB
// banner on this machine's loopback.
func TestDesktopImage(t *testing.T) {
	t.Parallel()
	mst, desktop, app := needDesktop(t)
	t.Logf("setup --with desktop and the stand-in app: %s; %s is %d MiB", desktopImages.took.Round(time.Second), desktop, desktopImages.size>>20)
	run := "desktoptest-" + docker.RandomHex(4)
	t.Cleanup(func() { noContainersOf(t, run) })
	view := freePort(t)
	r, err := docker.New(t.Context(), runner.Params{
		Options: map[string]string{docker.OptionImage: app, docker.OptionNetwork: "host", docker.OptionView: strconv.Itoa(view)},
		MST:     []string{mst}, MSTVersion: testVersion,
	})
	if err != nil {
		t.Fatalf("New with the app's image: %v", err)
	}
	start := time.Now()
	m, err := docker.CreateContainer(t.Context(), r, run, 0)
	if err != nil {
		t.Fatalf("creating a container of %s: %v", app, err)
	}
	t.Logf("the container and its desktop came up in %s", time.Since(start).Round(time.Millisecond))
	defer m.Remove(context.WithoutCancel(t.Context()))
	sh := func(what, script string, stdin io.Reader) string {
		t.Helper()
		if stdin == nil {
			stdin = strings.NewReader("")
		}
		var out, errOut bytes.Buffer
		if err := m.Exec(t.Context(), []string{"bash", "-c", script}, stdin, &out, &errOut); err != nil {
			t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", what, err, out.String(), errOut.String())
		}
		return strings.TrimSpace(out.String())
	}

	// Who runs, with what, where.
	got := sh("the user", `echo "$(id -un) $(id -u) $HOME $(stat -f -c %T "$HOME") $(stat -c %u /run/mst) $(awk '/^NoNewPrivs/ {print $2}' /proc/self/status) $(df --output=size -B1M /dev/shm | tail -1)"`, nil)
	if f := strings.Fields(got); len(f) != 7 || f[0] != "desktop" || f[1] != "1000" || f[2] != "/tmp/desktop" || f[3] != "tmpfs" || f[4] != "1000" || f[5] != "1" || f[6] != "512" {
		t.Errorf("user, uid, HOME, HOME's file system, /run/mst's owner, NoNewPrivs, /dev/shm MB = %q, want desktop 1000 /tmp/desktop tmpfs 1000 1 512", got)
	}
	if got := sh("the owned-desktop variables", `echo "$MST_DESKTOP_OWNED $MST_DESKTOP_RESTART $DISPLAY $DBUS_SESSION_BUS_ADDRESS"`, nil); got != "1 /usr/local/bin/mst-desktop-restart :99 unix:path=/tmp/runtime-desktop/bus" {
		t.Errorf("MST_DESKTOP_OWNED, MST_DESKTOP_RESTART, DISPLAY, DBUS_SESSION_BUS_ADDRESS = %q", got)
	}

	// The display: a GTK window opens, maps and goes.
	if got := sh("a GTK window", `python3 -c '
import gi; gi.require_version("Gtk", "3.0"); from gi.repository import Gtk
w = Gtk.Window(title="probe"); w.show_all()
while not w.get_mapped(): Gtk.main_iteration()
print("mapped"); w.destroy()'`, nil); got != "mapped" {
		t.Errorf("a GTK window on the display: %q, want it mapped", got)
	}
	// The buses.
	if got := sh("the accessibility bus", `gdbus call --session --dest org.a11y.Bus --object-path /org/a11y/bus --method org.a11y.Bus.GetAddress`, nil); !strings.Contains(got, "unix:path=") {
		t.Errorf("org.a11y.Bus.GetAddress = %q, want a unix socket's address", got)
	}
	// The keyring: the default collection is there, unlocked.
	if got := sh("the keyring", `gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets/aliases/default --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked`, nil); got != "(<false>,)" {
		t.Errorf("the default keyring's Locked = %q, want (<false>,)", got)
	}
	// The managed settings: written beside, renamed over.
	if got := sh("the managed settings", `f=/etc/claude-desktop/managed-settings.json; cat $f; echo '{"mcpServers":{}}' >$f.tmp && mv $f.tmp $f && cat $f`, nil); got != "{}\n{\"mcpServers\":{}}" {
		t.Errorf("managed-settings.json before and after a rename over it = %q", got)
	}

	// The restart command: without an app it says so; with one it starts
	// it, and again replaces it.
	var out, errOut bytes.Buffer
	err = m.Exec(t.Context(), []string{"env", "-u", "MST_DESKTOP_APP", "/usr/local/bin/mst-desktop-restart"}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "MST_DESKTOP_APP is not set") {
		t.Errorf("mst-desktop-restart without MST_DESKTOP_APP = %v, %q; want a failure that names it", err, errOut.String())
	}
	const started = `rm -f ~/standin.mapped; "$MST_DESKTOP_RESTART"; n=0
until [ -s ~/standin.mapped ]; do n=$((n+1)); [ $n -gt 600 ] && { echo "no window within 30s"; cat ~/.mst-desktop/app.log; exit 1; } >&2; sleep 0.05; done
echo "$(cat ~/.mst-desktop/app.pid) $(cat ~/standin.mapped)"`
	first := strings.Fields(sh("starting the app", started, nil))
	if got := sh("the app's window on the accessibility bus", "python3 - 'Stand-in Chat'", strings.NewReader(a11yApps)); !strings.Contains(got, "Stand-in Chat") {
		t.Errorf("the accessibility bus shows %q, want the app's window", got)
	}
	second := strings.Fields(sh("starting the app again", started, nil))
	if len(first) != 2 || len(second) != 2 || first[0] == second[0] {
		t.Fatalf("app pids (session, window) = %q then %q, want two processes", first, second)
	}
	gone := func(pid string) bool {
		return sh("is "+pid+" gone", `[ -e /proc/`+pid+` ] && echo running || echo gone`, nil) == "gone"
	}
	if !gone(first[0]) || !gone(first[1]) {
		t.Errorf("after a restart, the first app (%s) still runs", first)
	}
	// An app that ignores SIGTERM is killed after the grace.
	stubborn := sh("a stubborn app", `MST_DESKTOP_APP="trap '' TERM; exec sleep 600" "$MST_DESKTOP_RESTART" && cat ~/.mst-desktop/app.pid`, nil)
	sh("replacing the stubborn app", `MST_DESKTOP_GRACE=1 "$MST_DESKTOP_RESTART"`, nil)
	if !gone(stubborn) || !strings.Contains(sh("the app log", "cat ~/.mst-desktop/app.log", nil), "did not end within 1s of SIGTERM; killing it") {
		t.Errorf("the app that ignores SIGTERM (%s) was not killed after the grace", stubborn)
	}

	// The live view: an RFB server on this machine's loopback.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(view)), 5*time.Second)
	if err != nil {
		t.Fatalf("connecting to the live view: %v", err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	banner := make([]byte, 12)
	if _, err := io.ReadFull(conn, banner); err != nil || !strings.HasPrefix(string(banner), "RFB 00") {
		t.Errorf("the live view's banner = %q, %v; want RFB 00…", banner, err)
	}
	if err := m.Remove(context.WithoutCancel(t.Context())); err != nil {
		t.Error(err)
	}

	// A desktop that cannot come up ends its container and says why, on
	// the container's log.
	bad := exec.Command("docker", "run", "--rm", "--network", "none", "--tmpfs", "/tmp:rw,mode=1777", "--env", "MST_DESKTOP_SCREEN=bogus", desktop, "true")
	if said, err := bad.Output(); err == nil || !strings.Contains(string(said), "mst-desktop-session: Xvfb exited") {
		t.Errorf("a desktop whose Xvfb cannot start = %v, saying %q; want a failure that says Xvfb exited", err, said)
	}
}

// TestDesktopConformance runs the runner conformance suite in containers
// of the desktop image, one at a time (exclusive): the workers run as the
// desktop user, after the desktop came up.
func TestDesktopConformance(t *testing.T) {
	t.Parallel()
	mst, desktop, _ := needDesktop(t)
	_, server := workerImage(t)
	// The workers run as the desktop user, uid 1000, who must be let into
	// the mounted server's folder: the test binaries' is private to root.
	server = openCopy(t, server)
	// The suite names its runs; its shards run here under names of their
	// own, apart from TestConformance's.
	prefix := "desktopconf-" + docker.RandomHex(4) + "-"
	t.Cleanup(func() {
		noContainersOf(t, prefix+"runnertest-transcripts", prefix+"runnertest-cancel", prefix+"runnertest-ready")
	})
	runnertest.Run(t, runnertest.Harness{
		New: func(t *testing.T, p runner.Params) (runner.Runner, error) {
			p.MST = []string{mst}
			p.Options = map[string]string{docker.OptionImage: desktop, docker.OptionExclusive: "true"}
			r, err := docker.New(t.Context(), p)
			if err != nil {
				return nil, err
			}
			return renamedRuns{r, prefix}, nil
		},
		MSTVersion: testVersion,
		Shards:     2,
		Server:     []string{server},
	})
}

// renamedRuns runs each shard under its run id with a prefix.
type renamedRuns struct {
	runner.Runner
	prefix string
}

func (r renamedRuns) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	s.Run = r.prefix + s.Run
	return r.Runner.RunShard(ctx, s)
}

// openCopy copies the program at path into a folder that every user may
// enter, and returns the copy's path.
func openCopy(t *testing.T, path string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mst-desktop-server-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, filepath.Base(path)), b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, filepath.Base(path))
}

// freePort is a TCP port on the loopback that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
