package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/runner"
)

// TestDesktopHostGate is the exclusive rule: with the gate, a shard waits
// for its turn until the shard before it has handed it on (its container
// removed), and a cancel while it waits ends the wait with the cause;
// without it (nil), every shard goes at once.
func TestDesktopHostGate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newHostGate()
		first, err := g.acquire(t.Context())
		if err != nil {
			t.Fatalf("the first acquire = %v", err)
		}
		var running atomic.Int32
		got := make(chan int, 3)
		var done [3]chan struct{}
		for i := range 3 {
			done[i] = make(chan struct{})
			go func() {
				release, err := g.acquire(t.Context())
				if err != nil {
					t.Errorf("shard %d: acquire = %v", i, err)
					return
				}
				running.Add(1)
				got <- i
				<-done[i] // the shard's container lives
				running.Add(-1)
				release()
				release() // a second release hands on nothing more
			}()
		}
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("%d shards got a turn while the first held it, want none", len(got))
		}
		first()
		for range 3 {
			synctest.Wait()
			if n := running.Load(); n != 1 {
				t.Fatalf("%d shards hold a turn at once, want 1", n)
			}
			close(done[<-got])
		}
		synctest.Wait()

		// A cancel while waiting.
		hold, _ := g.acquire(t.Context())
		ctx, cancel := context.WithCancelCause(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := g.acquire(ctx)
			errc <- err
		}()
		synctest.Wait()
		why := errors.New("interrupted")
		cancel(why)
		if err := <-errc; !errors.Is(err, why) {
			t.Errorf("acquire cancelled while waiting = %v, want the cause %v", err, why)
		}
		hold()
	})

	// No gate: no wait.
	var none *hostGate
	for range 3 {
		release, err := none.acquire(t.Context())
		if err != nil || release == nil {
			t.Fatalf("acquire without a gate = %v, want a turn at once", err)
		}
		defer release()
	}
}

// TestDesktopView reads the view option: a port alone, or a loopback
// address and port; an address beyond this machine, a bad port and a view
// without a network are refused.
func TestDesktopView(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"5901":           "127.0.0.1:5901",
		"127.0.0.1:5901": "127.0.0.1:5901",
		"localhost:6000": "127.0.0.1:6000",
		"127.0.0.2:6000": "127.0.0.2:6000",
		"[::1]:5905":     "[::1]:5905",
	} {
		v, err := parseView(in)
		if err != nil || v.String() != want {
			t.Errorf("parseView(%q) = %v, %v; want %s", in, v, err, want)
		}
	}
	for in, says := range map[string]string{
		"0.0.0.0:5901":     "loopback only",
		"192.168.1.2:5901": "loopback only",
		"example.com:5901": "loopback only",
		"vnc":              "not a port",
		"127.0.0.1:0":      "not a port",
		"127.0.0.1:70000":  "not a port",
		"127.0.0.1:":       "not a port",
	} {
		if _, err := parseView(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("parseView(%q) = %v, want an error that says %q", in, err, says)
		}
	}
	if _, err := parseSettings(map[string]string{OptionView: "5901", OptionNetwork: "none"}); err == nil || !strings.Contains(err.Error(), "network=none") {
		t.Errorf("view with network=none = %v, want it refused", err)
	}
	v, _ := parseView("65535")
	if _, err := v.forShard(1, false); err == nil {
		t.Error("shard 1's view past port 65535 = nil error, want one")
	}
	if got, err := v.forShard(1, true); err != nil || got.port != 65535 {
		t.Errorf("shard 1's view, one container at a time = %v, %v; want the same port", got, err)
	}
}

// TestDesktopArgs checks what a desktop container gets besides every
// container's: more shared memory always; with the view, x11vnc on the
// view's address on the host's network, else the container's 5900
// published there, shard i at PORT+i unless containers run one at a time.
func TestDesktopArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		options map[string]string
		shard   int
		want    []string
	}{
		{"no view", nil, 0, []string{"--shm-size", "512m"}},
		{"view, own network", map[string]string{OptionView: "5901"}, 0,
			[]string{"--shm-size", "512m", "--env", "MST_DESKTOP_VIEW=1", "--publish", "127.0.0.1:5901:5900"}},
		{"view, shard 2", map[string]string{OptionView: "127.0.0.1:5901", OptionNetwork: "bridge"}, 2,
			[]string{"--shm-size", "512m", "--env", "MST_DESKTOP_VIEW=1", "--publish", "127.0.0.1:5903:5900"}},
		{"view, shard 2, one at a time", map[string]string{OptionView: "5901", OptionExclusive: "true"}, 2,
			[]string{"--shm-size", "512m", "--env", "MST_DESKTOP_VIEW=1", "--publish", "127.0.0.1:5901:5900"}},
		{"view, host network", map[string]string{OptionView: "5901", OptionNetwork: "host"}, 1,
			[]string{"--shm-size", "512m", "--env", "MST_DESKTOP_VIEW=1", "--env", "MST_DESKTOP_VIEW_LISTEN=127.0.0.1", "--env", "MST_DESKTOP_VIEW_PORT=5902"}},
	} {
		set, err := parseSettings(tc.options)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r := &dockerRunner{set: set}
		got, err := r.desktopArgs(tc.shard)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: desktopArgs(%d) (-want +got):\n%s", tc.name, tc.shard, diff)
		}
	}
}

// TestDesktopSettings reads the exclusive option and setup's app options.
func TestDesktopSettings(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"true": true, "1": true, "false": false} {
		set, err := parseSettings(map[string]string{OptionExclusive: v})
		if err != nil || set.exclusive != want {
			t.Errorf("exclusive=%s: %+v, %v; want %t", v, set, err, want)
		}
	}
	if _, err := parseSettings(map[string]string{OptionExclusive: "sometimes"}); err == nil {
		t.Error("exclusive=sometimes = nil error, want one")
	}
	set, err := parseSettings(map[string]string{OptionDesktopPackage: "/x/app.deb", OptionDesktopApp: "app --no-sandbox"})
	if err != nil || set.desktopPackage != "/x/app.deb" || set.desktopApp != "app --no-sandbox" {
		t.Errorf("desktopPackage and desktopApp: %+v, %v", set, err)
	}
}

// TestDesktopSetupRefusals checks that Setup refuses bad desktop app
// options before it looks for Docker, and that a run refuses setup's
// options.
func TestDesktopSetupRefusals(t *testing.T) {
	// Not parallel: no docker CLI on PATH, so Setup must not get that far.
	t.Setenv("PATH", t.TempDir())
	deb := filepath.Join(t.TempDir(), "stand-in_1.0_all.deb")
	os.WriteFile(deb, []byte("!<arch>\n"), 0o644)
	tar := filepath.Join(t.TempDir(), "app.tar")
	os.WriteFile(tar, nil, 0o644)
	for _, tc := range []struct {
		options map[string]string
		want    string
	}{
		{map[string]string{OptionDesktopApp: "app"}, "give both"},
		{map[string]string{OptionDesktopPackage: deb}, "the command line that starts the app"},
		{map[string]string{OptionDesktopPackage: filepath.Join(t.TempDir(), "missing.deb"), OptionDesktopApp: "app"}, "no such package file"},
		{map[string]string{OptionDesktopPackage: tar, OptionDesktopApp: "app"}, "Debian package (.deb)"},
		{map[string]string{OptionDesktopPackage: deb, OptionDesktopApp: "app", OptionImage: "acme/w:1"}, "give one or the other"},
	} {
		if err := Setup(context.Background(), runner.SetupParams{Options: tc.options}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Setup(%v) = %v, want an error that says %q", tc.options, err, tc.want)
		}
	}
	_, err := New(context.Background(), runner.Params{Options: map[string]string{OptionDesktopPackage: deb, OptionDesktopApp: "app"}})
	if err == nil || !strings.Contains(err.Error(), "are for `mst runner setup docker`") {
		t.Errorf("New with setup's desktop options = %v, want them refused", err)
	}
}

// TestDesktopAppImage names the app's image after its package.
func TestDesktopAppImage(t *testing.T) {
	t.Parallel()
	base := "mst-worker:1.2.3-python-desktop"
	for pkg, want := range map[string]string{
		"/dl/claude-desktop_0.14.10_amd64.deb": base + "-app-claude-desktop",
		"ChatGPT App.deb":                      base + "-app-chatgpt-app",
		"/dl/_.deb":                            base + "-app-app",
	} {
		if got := desktopAppImage(base, pkg); got != want {
			t.Errorf("desktopAppImage(%s) = %s, want %s", pkg, got, want)
		}
	}
	long := desktopAppImage(base, strings.Repeat("x", 200)+".deb")
	if _, tag, _ := strings.Cut(long, ":"); len(tag) != 128 {
		t.Errorf("the tag of a long package name has %d characters, want 128", len(tag))
	}
}
