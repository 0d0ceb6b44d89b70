package main

import (
	"fmt"
	"time"
)

// usage is what measure learned of one process the bench started (an mst
// command) and of the processes under it.
type usage struct {
	// own is the CPU time (user and system, all threads) of the process
	// itself, without any child.
	own time.Duration
	// children is the CPU time of every descendant the process waited
	// for: each child's own time plus that of the descendants it waited
	// for in turn. A descendant left unwaited is in no figure.
	children time.Duration
	// peakRSS is the process's own peak resident memory (VmHWM), as last
	// read while it ran; growth in its last sampling interval is missed.
	peakRSS int64
	// treeRSS is the largest peak of the process and of any descendant it
	// waited for (ru_maxrss): a check on peakRSS, not a figure of MST's.
	treeRSS int64
	// kids are the last samples of the children measure followed.
	kids []kidSample
}

// kidSample is the last reading of one followed child's CPU time.
type kidSample struct {
	pid      int
	own      time.Duration // the child's own CPU time
	children time.Duration // that of the descendants it had waited for
	// final is set when the sample was read after the child exited (and
	// before it was reaped): nothing of the child's is missing from it.
	final bool
}

// kidsTotal sums the followed children's samples, and counts those that
// are final.
func (u usage) kidsTotal() (own, children time.Duration, final int) {
	for _, k := range u.kids {
		own += k.own
		children += k.children
		if k.final {
			final++
		}
	}
	return own, children, final
}

// perTrial divides d among n trials, rounded for a table.
func perTrial(d time.Duration, n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f ms", float64(d)/float64(n)/float64(time.Millisecond))
}

// megabytes formats a byte count in MiB.
func megabytes(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
