package runner_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mst-eval/mst/runner"
)

func TestMachineShards(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	const mib = 1 << 20
	for _, c := range []struct {
		name, meminfo string
		floor         int
		want          int
	}{
		{"24 GiB at 256 MiB a shard", "MemTotal:       25165824 kB\nMemFree: 1 kB\n", 8, 96},
		{"a small machine keeps its floor", "MemTotal:        2097152 kB\n", 8, 8},
		{"a huge machine is capped", "MemFree: 1 kB\nMemTotal:     2147483648 kB\n", 8, runner.MaxMachineShards},
		{"no MemTotal", "MemFree: 1 kB\n", 8, 8},
		{"a unit not kB", "MemTotal: 25165824 MB\n", 8, 8},
		{"garbage", "MemTotal: lots kB\n", 8, 8},
	} {
		if got := runner.MachineShards(c.floor, 256*mib, write(c.name, c.meminfo)); got != c.want {
			t.Errorf("%s: MachineShards = %d, want %d", c.name, got, c.want)
		}
	}
	if got := runner.MachineShards(8, 256*mib, filepath.Join(dir, "missing")); got != 8 {
		t.Errorf("no meminfo: MachineShards = %d, want the floor 8", got)
	}
}
