package ssh

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want target
		err  string
	}{
		{in: "alice@example.com", want: target{"alice", "example.com", "22"}},
		{in: "alice@example.com:2222", want: target{"alice", "example.com", "2222"}},
		{in: "example.com", want: target{"me", "example.com", "22"}},
		{in: " 10.0.0.2:22 ", want: target{"me", "10.0.0.2", "22"}},
		{in: "bob@[::1]:2200", want: target{"bob", "::1", "2200"}},
		{in: "bob@[::1]", want: target{"bob", "::1", "22"}},
		{in: "bob@::1", want: target{"bob", "::1", "22"}},
		{in: "@host", err: "user before @ is empty"},
		{in: "alice@", err: "no host name"},
		{in: "alice@host:ssh", err: "port \"ssh\""},
		{in: "alice@host:70000", err: "port \"70000\""},
	}
	for _, tt := range tests {
		got, err := parseTarget(tt.in, "me")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseTarget(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSSHOptions(t *testing.T) {
	t.Parallel()
	o, err := parseSSHOptions(map[string]string{
		"hosts": "a@one:2201, b@two", "identity": "/keys/id", "knownHosts": "/keys/known",
		"strictHostKeyChecking": "false", "workDir": "/srv/mst", "mst": "/opt/mst",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := sshOptions{
		connOptions: connOptions{Identity: "/keys/id", KnownHosts: "/keys/known", Strict: false},
		Hosts:       []target{{"a", "one", "2201"}, {"b", "two", "22"}},
		WorkDir:     "/srv/mst", MST: "/opt/mst",
		// Without coordinatorHost, a detached run's coordinator runs on
		// the first host.
		CoordinatorHost: target{"a", "one", "2201"},
	}
	if diff := cmp.Diff(want, o, cmp.AllowUnexported(sshOptions{})); diff != "" {
		t.Errorf("parseSSHOptions (-want +got):\n%s", diff)
	}
	d, err := parseSSHOptions(map[string]string{"hosts": "h"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Strict || d.WorkDir != defaultWorkDir || d.MST != "" || !strings.HasSuffix(d.KnownHosts, "/.ssh/known_hosts") {
		t.Errorf("defaults = %+v; want strict checking, %s, no mst and ~/.ssh/known_hosts", d, defaultWorkDir)
	}
	if _, err := parseSSHOptions(map[string]string{}); err == nil || !strings.Contains(err.Error(), "hosts=user@host") {
		t.Errorf("parseSSHOptions without hosts = %v, want an error that says how to pass them", err)
	}
}

// TestCoordinatorHostOption checks the coordinatorHost option: one
// user@host[:port] read as the hosts are, defaulting to the first host,
// and refused, naming the option, when it is not one host.
func TestCoordinatorHostOption(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want target
		err  string
	}{
		{in: "", want: target{"a", "one", "2201"}},
		{in: "boss@control.example.com", want: target{"boss", "control.example.com", "22"}},
		{in: "control:2222", want: target{localUser(), "control", "2222"}},
		{in: "boss@[2001:db8::1]:2200", want: target{"boss", "2001:db8::1", "2200"}},
		// Another host than those the shards run on is fine.
		{in: "b@two", want: target{"b", "two", "22"}},
		{in: "@control", err: "coordinatorHost: host \"@control\": the user before @ is empty"},
		{in: "boss@", err: "coordinatorHost: host \"boss@\": no host name"},
		{in: "boss@control:0", err: "coordinatorHost: host \"boss@control:0\": port \"0\""},
		{in: "boss@control:ssh", err: "port \"ssh\" is not a number"},
		{in: "a@one,b@two", err: "coordinatorHost=a@one,b@two: name one host"},
		{in: "  ", err: "no host name"},
	}
	for _, tt := range tests {
		m := map[string]string{"hosts": "a@one:2201,b@two"}
		if tt.in != "" {
			m["coordinatorHost"] = tt.in
		}
		o, err := parseSSHOptions(m)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("coordinatorHost=%q: %+v, %v; want an error containing %q", tt.in, o.CoordinatorHost, err, tt.err)
			}
			continue
		}
		if err != nil || o.CoordinatorHost != tt.want {
			t.Errorf("coordinatorHost=%q: %+v, %v; want %+v", tt.in, o.CoordinatorHost, err, tt.want)
		}
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"":                 "''",
		"plain/path-1.2_x": "plain/path-1.2_x",
		"user@host:22":     "user@host:22",
		"two words":        "'two words'",
		"it's":             `'it'\''s'`,
		"$HOME":            "'$HOME'",
		"~/x":              "'~/x'",
		"a;b|c&d":          "'a;b|c&d'",
		"line\nbreak":      "'line\nbreak'",
	}
	for in, want := range tests {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got, want := commandLine([]string{"mst", "collect", "--bundle", "/w/my run/bundle"}), "mst collect --bundle '/w/my run/bundle'"; got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}

func TestPlatform(t *testing.T) {
	t.Parallel()
	tests := map[string][2]string{
		"Linux x86_64":    {"linux", "amd64"},
		"Linux aarch64":   {"linux", "arm64"},
		"Darwin arm64":    {"darwin", "arm64"},
		"Linux armv7l":    {"linux", "arm"},
		"FreeBSD amd64":   {"freebsd", "amd64"},
		"Linux riscv64":   {"linux", "riscv64"},
		"Linux i686":      {"linux", "386"},
		"Linux ppc64le\n": {"linux", "ppc64le"},
	}
	for in, want := range tests {
		if goos, goarch := platform(in); goos != want[0] || goarch != want[1] {
			t.Errorf("platform(%q) = %s/%s, want %s/%s", in, goos, goarch, want[0], want[1])
		}
	}
}

func TestHostPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"~":               "/home/u",
		"~/.cache/mst":    "/home/u/.cache/mst",
		"work":            "/home/u/work",
		"/srv/mst/../mst": "/srv/mst",
	} {
		if got := hostPath(in, "/home/u"); got != want {
			t.Errorf("hostPath(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFolderAndMachineID(t *testing.T) {
	t.Parallel()
	if got, want := folderName("quickstart-20261201-070000-abcdef", 3, 1, false), "quickstart-20261201-070000-abcdef-shard-3"; got != want {
		t.Errorf("folderName(attempt 1) = %s, want %s", got, want)
	}
	if got, want := folderName("a/b c", 0, 2, false), "a_b_c-shard-0-attempt-2"; got != want {
		t.Errorf("folderName(attempt 2) = %s, want %s", got, want)
	}
	if got, want := folderName("a/b c", 1, 2, true), "a_b_c-shard-1-attempt-2-grade"; got != want {
		t.Errorf("folderName(attempt 2, grading) = %s, want %s", got, want)
	}
	for _, tg := range []target{{"root", "127.0.0.1", "2222"}, {"me", "::1", "22"}} {
		id := machineID(tg, "/root/.cache/mst/work/r-shard-1")
		got, dir, err := parseMachineID(id)
		if err != nil || got != tg || dir != "/root/.cache/mst/work/r-shard-1" {
			t.Errorf("parseMachineID(%s) = %+v, %s, %v; want %+v and the folder back", id, got, dir, err, tg)
		}
	}
	m := folderPattern.FindStringSubmatch("quickstart-20261201-070000-abcdef-shard-12-attempt-3")
	if diff := cmp.Diff([]string{"quickstart-20261201-070000-abcdef-shard-12-attempt-3", "quickstart-20261201-070000-abcdef", "12", "3"}, m); diff != "" {
		t.Errorf("folderPattern (-want +got):\n%s", diff)
	}
}
