//go:build unix

package docker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/runner/clicmd"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/runner"
)

// TestContainerTellsWorkerItsImage checks that a shard's container is
// started with the variable the worker reads its image from
// (shard.ImageDigestEnv), holding the image pinned by digest, as run.json
// records it. A stand-in docker records the command lines it is given.
func TestContainerTellsWorkerItsImage(t *testing.T) {
	t.Parallel()
	if imageDigestEnv != shard.ImageDigestEnv {
		t.Fatalf("the containers set %s, and workers read %s", imageDigestEnv, shard.ImageDigestEnv)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "docker")
	script := "#!/bin/sh\n" +
		"for a in \"$@\"; do printf '%s\\n' \"$a\"; done >> " + rec + "\n" +
		"echo '--' >> " + rec + "\n" +
		"case \"$1 $3\" in \"exec /usr/local/bin/mst\") echo 'mst 9.9.9-test';; esac\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	img := image{ref: "mst-worker:9.9.9-test", id: "sha256:0badc0de"}
	r := &dockerRunner{
		cli: &clicmd.CLI{Name: "docker", Bin: fake}, img: img, version: "9.9.9-test",
		set: settings{mst: "/usr/local/bin/mst", workDir: "/work"}, params: runner.Params{},
		logger: slog.New(slog.DiscardHandler),
	}
	m, err := r.create(context.Background(), containerSpec{run: "r1", shard: 0, attempt: 1})
	if err != nil {
		t.Fatalf("create = %v", err)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Split(strings.TrimSuffix(string(data), "--\n"), "--\n")
	run := strings.Split(strings.TrimSpace(calls[0]), "\n")
	want := imageDigestEnv + "=mst-worker:9.9.9-test@sha256:0badc0de"
	if run[0] != "run" || !slices.Contains(run, want) {
		t.Errorf("the container was started with %q, want %s among its arguments", run, want)
	}
	if m.Image() != "mst-worker:9.9.9-test@sha256:0badc0de" {
		t.Errorf("the machine's image is %q, want the one the worker is told", m.Image())
	}
}
