package docker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// Desktop images. A worker image labelled LabelDesktop (the one
// `mst runner setup docker --with desktop` builds from
// images/Dockerfile.desktop, and every image FROM it) holds a desktop for
// desktop clients: Xvfb, a private session D-Bus, the accessibility bus,
// an unlocked keyring, and mst-desktop-session, which starts them. The
// runner starts each container of such an image through that script,
// with the shared memory Chromium-based apps need and /run/mst owned by
// the desktop user, waits until the desktop is up, and, with the view
// option, serves the display as a view-only VNC on this machine's
// loopback. docs/desktop.md says why each part is there.

// LabelDesktop, on a worker image, marks a desktop image.
const LabelDesktop = "mst.desktop"

const (
	// desktopSession is the desktop image's session script: its
	// entrypoint, which starts the desktop and then runs the container's
	// command, and `--wait SECONDS`, which waits until the desktop is up.
	desktopSession = "/usr/local/bin/mst-desktop-session"
	// desktopUID is the desktop user's uid and gid in the desktop image
	// (and the images FROM it), whose processes run as it.
	desktopUID = "1000"
	// desktopShm is the size of a desktop container's /dev/shm: Docker's
	// 64 MB is too little for Chromium and Electron renderers.
	desktopShm = "512m"
	// desktopWait is how long, in seconds, a container's desktop may take
	// to come up.
	desktopWait = "60"
	// viewPort is the port x11vnc listens on in a container with a
	// network of its own.
	viewPort = 5900
)

// desktopEnv are the variables a desktop container's scripts read.
const (
	envView       = "MST_DESKTOP_VIEW"
	envViewListen = "MST_DESKTOP_VIEW_LISTEN"
	envViewPort   = "MST_DESKTOP_VIEW_PORT"
)

// viewAddr is where this machine serves a live view: a loopback address
// and a port.
type viewAddr struct {
	host string
	port int
}

func (v viewAddr) String() string { return net.JoinHostPort(v.host, strconv.Itoa(v.port)) }

// parseView reads the view option: PORT, or HOST:PORT with HOST a
// loopback address. The view has no password, so it is never served
// beyond this machine.
func parseView(s string) (viewAddr, error) {
	host, port := "127.0.0.1", s
	if strings.Contains(s, ":") {
		var err error
		if host, port, err = net.SplitHostPort(s); err != nil {
			return viewAddr{}, fmt.Errorf("docker runner: --runner-option view=%s: give 127.0.0.1:PORT or PORT (%v)", s, err)
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return viewAddr{}, fmt.Errorf("docker runner: --runner-option view=%s: %q is not a port (1 to 65535); give 127.0.0.1:PORT or PORT", s, port)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return viewAddr{}, fmt.Errorf("docker runner: --runner-option view=%s: the live view has no password, so it is served on this machine's loopback only: give 127.0.0.1:PORT", s)
	}
	return viewAddr{host: host, port: n}, nil
}

// forShard is where shard i's view is served: PORT+i, or PORT for every
// shard when containers run one at a time.
func (v viewAddr) forShard(i int, exclusive bool) (viewAddr, error) {
	if !exclusive {
		v.port += i
	}
	if v.port > 65535 {
		return v, fmt.Errorf("docker runner: --runner-option view: shard %d's view would be on port %d, past 65535: give a lower port", i, v.port)
	}
	return v, nil
}

// desktopArgs are the docker run arguments a desktop container of shard i
// gets besides every container's: its shared memory and, with the view
// option, the live view. On the host's network x11vnc listens on the
// view's address itself; on another network the container's port 5900 is
// published there.
func (r *dockerRunner) desktopArgs(i int) ([]string, error) {
	a := []string{"--shm-size", desktopShm}
	if r.set.view == nil {
		return a, nil
	}
	v, err := r.set.view.forShard(i, r.set.exclusive)
	if err != nil {
		return nil, err
	}
	a = append(a, "--env", envView+"=1")
	if r.set.network == "host" {
		return append(a, "--env", envViewListen+"="+v.host, "--env", envViewPort+"="+strconv.Itoa(v.port)), nil
	}
	return append(a, "--publish", v.String()+":"+strconv.Itoa(viewPort)), nil
}

// waitDesktop waits until the desktop of the container name is up. A
// session that failed ends its container, so its error holds what
// mst-desktop-session said went wrong, which it prints on its stdout: the
// container's log.
func (r *dockerRunner) waitDesktop(ctx context.Context, name string) error {
	_, err := r.cli.Run(ctx, nil, "exec", name, desktopSession, "--wait", desktopWait)
	if err == nil {
		return nil
	}
	if said, lerr := r.cli.Run(ctx, nil, "logs", "--tail", "30", name); lerr == nil && said != "" {
		return fmt.Errorf("the desktop of %s did not come up (%w); it said:\n%s", name, err, said)
	}
	return fmt.Errorf("the desktop of %s did not come up: %w", name, err)
}

// hostGate lets one shard's container live at a time on the Docker host
// (the exclusive option). A nil gate lets every shard through at once.
type hostGate struct {
	turn chan struct{}
}

func newHostGate() *hostGate { return &hostGate{turn: make(chan struct{}, 1)} }

// acquire waits for the turn, or for ctx to end; release hands the turn
// on (once, however often it is called).
func (g *hostGate) acquire(ctx context.Context) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	select {
	case g.turn <- struct{}{}:
		return sync.OnceFunc(func() { <-g.turn }), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
