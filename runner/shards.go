package runner

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// MaxMachineShards is the most shards a runner whose machines are
// processes or containers of one machine offers, however large it is.
const MaxMachineShards = 256

// MachineShards is how many shards a runner whose shards share one
// machine can run at once: floor, or as many as the machine's memory
// holds at perShard bytes each when that is more (at most
// MaxMachineShards). Trials mostly wait on a model, so what bounds shards
// there is memory, not cores: a shard is an mst worker, its servers and
// its client, idle most of the time. memInfo is /proc/meminfo's path ("":
// the real one); a machine whose memory cannot be read gets floor.
func MachineShards(floor int, perShard uint64, memInfo string) int {
	if memInfo == "" {
		memInfo = "/proc/meminfo"
	}
	total := memTotal(memInfo)
	if total == 0 || perShard == 0 {
		return floor
	}
	n := int(min(total/perShard, MaxMachineShards))
	return max(floor, n)
}

// memTotal reads MemTotal (bytes) from a meminfo file, 0 when it cannot.
func memTotal(path string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
