package servers

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/mst-eval/mst/internal/ground/proctree"
)

// started holds the process groups of the stdio servers this process
// started and has not stopped yet, by group id.
var started struct {
	sync.Mutex
	groups map[int]bool
}

// track records the group of c's server once its command has started.
func (c *Conn) track() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	started.Lock()
	defer started.Unlock()
	if started.groups == nil {
		started.groups = map[int]bool{}
	}
	started.groups[c.cmd.Process.Pid] = true
}

// stopGroup kills what is left of the process group of c's server (its
// leader has ended or is about to; what it started may not have). The
// group id stays reserved while any of its processes lives, so the kill
// never reaches another group.
func (c *Conn) stopGroup() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	pgid := c.cmd.Process.Pid
	started.Lock()
	delete(started.groups, pgid)
	started.Unlock()
	proctree.KillGroup(pgid, syscall.SIGKILL)
}

// StopAll kills the process group of every stdio server this process
// started and has not closed: what a worker does on its way out, however
// its trials ended.
func StopAll() {
	started.Lock()
	groups := started.groups
	started.groups = nil
	started.Unlock()
	for pgid := range groups {
		proctree.KillGroup(pgid, syscall.SIGKILL)
	}
}

// GuardWorker prepares a worker process (`mst collect`) to outlive its
// coordinator only briefly and cleanly: a write to a stdout whose reader
// has gone fails with an error instead of killing the process on the
// spot (SIGPIPE), so the worker's usual way out runs; and the function it
// returns, called as the worker returns, kills every server group still
// running. The worker does not ask for a parent-death signal itself: its
// parent is often only a launcher that exits at once (docker exec's runc,
// a shell), which would end a healthy worker. A runner that starts the
// worker as its own child asks for it (proctree.DieWithParent); every other
// worker ends when its stdin does.
//
//	defer servers.GuardWorker()()
func GuardWorker() (stop func()) {
	// A signal the program asks for is not ignored, so the servers it
	// starts get SIGPIPE's default action back when they exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return StopAll
}
