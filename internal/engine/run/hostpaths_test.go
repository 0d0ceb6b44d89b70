package run_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/servers"
)

// TestHostPathsArgs: the absolute paths in servers' arguments, given
// alone or as a flag's value, are listed once each for runners to mount;
// relative paths and plain words are not.
func TestHostPathsArgs(t *testing.T) {
	b := &shard.Bundle{Settings: []shard.Setting{
		{Servers: []servers.Server{{Name: "fs", Command: "/opt/fs/server", Args: []string{"--root=/srv/data", "/srv/notes.db", "./rel", "-v", "--name", "x=/not-a-flag"}, Dir: "/srv"}}},
		{Servers: []servers.Server{{Name: "fs", Command: "/opt/fs/server", Args: []string{"/srv/notes.db"}}}},
	}}
	got := run.HostPaths(b, "/evals")
	want := runner.HostPaths{Commands: []string{"/opt/fs/server"}, Dirs: []string{"/srv"}, Args: []string{"/srv/data", "/srv/notes.db"}, ConfigDir: "/evals"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HostPaths (-want +got):\n%s", diff)
	}
}
