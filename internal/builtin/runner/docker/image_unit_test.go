package docker

import (
	"strings"
	"testing"
)

// TestParseInspect reads `docker image inspect` output of every shape an
// image may have: without labels (null, empty or no Config at all), with
// MST's label, built here (no RepoDigests) or pulled (RepoDigests).
func TestParseInspect(t *testing.T) {
	t.Parallel()
	const id = "sha256:7041f3aebd841dae432946381390140b80361086758a2b1b9700ea2c574447db"
	const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	tests := []struct {
		name, ref, json string
		want            image
		record          string
	}{
		{"labels null", "acme/plain:1", `[{"Id":"` + id + `","RepoDigests":[],"Config":{"Labels":null}}]`,
			image{ref: "acme/plain:1", id: id}, "acme/plain:1@" + id},
		{"no labels key", "acme/plain:1", `[{"Id":"` + id + `","Config":{}}]`,
			image{ref: "acme/plain:1", id: id}, "acme/plain:1@" + id},
		{"no config", "acme/plain:1", `[{"Id":"` + id + `"}]`,
			image{ref: "acme/plain:1", id: id}, "acme/plain:1@" + id},
		{"other labels", "acme/plain:1", `[{"Id":"` + id + `","Config":{"Labels":{"org.opencontainers.image.title":"x"}}}]`,
			image{ref: "acme/plain:1", id: id}, "acme/plain:1@" + id},
		{"mst label", "mst-worker:1.2.3", `[{"Id":"` + id + `","Config":{"Labels":{"mst.binary":"abc"}}}]`,
			image{ref: "mst-worker:1.2.3", id: id, binary: "abc"}, "mst-worker:1.2.3@" + id},
		{"desktop label", "mst-worker:1.2.3-python-desktop", `[{"Id":"` + id + `","Config":{"Labels":{"mst.binary":"abc","mst.desktop":"1"}}}]`,
			image{ref: "mst-worker:1.2.3-python-desktop", id: id, binary: "abc", desktop: true}, "mst-worker:1.2.3-python-desktop@" + id},
		{"desktop label off", "acme/w:1", `[{"Id":"` + id + `","Config":{"Labels":{"mst.desktop":"0"}}}]`,
			image{ref: "acme/w:1", id: id}, "acme/w:1@" + id},
		{"pulled", "ghcr.io/acme/worker:2", `[{"Id":"` + id + `","RepoDigests":["ghcr.io/acme/worker@` + digest + `"]}]`,
			image{ref: "ghcr.io/acme/worker:2", id: id, digest: digest}, "ghcr.io/acme/worker:2@" + digest},
		{"pulled, named by digest", "ghcr.io/acme/worker@" + digest, `[{"Id":"` + id + `","RepoDigests":["ghcr.io/acme/worker@` + digest + `"]}]`,
			image{ref: "ghcr.io/acme/worker@" + digest, id: id, digest: digest}, "ghcr.io/acme/worker@" + digest},
	}
	for _, tt := range tests {
		got, err := parseInspect(tt.ref, []byte(tt.json))
		if err != nil {
			t.Errorf("%s: parseInspect = %v", tt.name, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: parseInspect = %+v, want %+v", tt.name, got, tt.want)
		}
		if s := got.String(); s != tt.record {
			t.Errorf("%s: recorded as %q, want %q", tt.name, s, tt.record)
		}
	}
	for _, bad := range []string{``, `[]`, `[{}]`, `{"Id":"x"}`, `[{"Id":"a"},{"Id":"b"}]`} {
		if _, err := parseInspect("acme/x", []byte(bad)); err == nil || !strings.Contains(err.Error(), "acme/x") {
			t.Errorf("parseInspect(%q) = %v, want an error naming the image", bad, err)
		}
	}
}

// TestRepoDigest picks the digest under the image's own repository,
// whichever way Docker Hub's names are spelled, and else the first.
func TestRepoDigest(t *testing.T) {
	t.Parallel()
	const a, b = "sha256:aaaa", "sha256:bbbb"
	tests := []struct {
		ref     string
		digests []string
		want    string
	}{
		{"busybox", []string{"other/x@" + a, "busybox@" + b}, b},
		{"docker.io/library/busybox:1.36", []string{"other/x@" + a, "busybox@" + b}, b},
		{"busybox:latest", []string{"docker.io/library/busybox@" + b}, b},
		{"localhost:5000/w:1", []string{"localhost:5000/w@" + b}, b},
		{"localhost:5000/w", []string{"localhost:5000/v@" + a, "localhost:5000/w@" + b}, b},
		{"acme/w:1", []string{"mirror.example/acme/w@" + a}, a},
		{"acme/w:1", nil, ""},
		{"acme/w:1", []string{"no digest here"}, ""},
	}
	for _, tt := range tests {
		if got := repoDigest(tt.ref, tt.digests); got != tt.want {
			t.Errorf("repoDigest(%q, %q) = %q, want %q", tt.ref, tt.digests, got, tt.want)
		}
	}
}

// TestVersionMessages checks that a mismatch and a missing mst say what
// was found, what is needed and both ways to fix it.
func TestVersionMessages(t *testing.T) {
	t.Parallel()
	msg := mismatch("acme/w:1", "/usr/bin/mst", "1.0.0", "1.2.0", "arm64")
	for _, want := range []string{"acme/w:1", "mst 1.0.0", "/usr/bin/mst", "mst 1.2.0", "mst runner setup docker", "--runner-option mst=PATH", "GOARCH=arm64"} {
		if !strings.Contains(msg, want) {
			t.Errorf("mismatch message %q does not say %q", msg, want)
		}
	}
	msg = noMSTHelp("/mst", "1.2.0", "amd64")
	for _, want := range []string{"mst 1.2.0", "--runner-option mst=PATH", "mst runner setup docker", "CGO_ENABLED=0", "GOARCH=amd64"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing-mst message %q does not say %q", msg, want)
		}
	}
}
