package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"regexp"
	"strings"
	"time"
)

// A detached run (mst run --detach) moves the coordinator off the machine
// where the command was typed: the runner creates one coordinator machine,
// the launching mst copies a bundle there and starts `mst coordinate` over
// the machine's channel, and returns. The coordinator then runs the
// commands a user would type (mst run, mst run --resume, mst grade) on that
// machine, with the same runner and options, and writes the run and its
// status records to the result store.
//
// A runner opts in with Definition.Coordinator. One without it refuses
// --detach before any machine is created.

// CoordinatorParams is what Definition.Coordinator is given.
type CoordinatorParams struct {
	// Options are the runner's own --runner-option values (shards and
	// keep left out), checked against Definition.Options: the coordinator
	// machine is made where the runner makes its machines.
	Options map[string]string
	// ID is the detached run's id, which the machine is named and
	// labelled with.
	ID string
	// Deadline is how long the machine may live: the runner removes it by
	// itself after that, whatever the coordinator does.
	Deadline time.Duration
	// MST is the command that runs this mst binary on this machine, and
	// MSTVersion its version: the coordinator machine runs the same.
	MST        []string
	MSTVersion string
	// HostPaths are the paths on this machine the eval's servers use
	// (their commands, folders, argument paths, the config's folder), for
	// runners whose coordinator machine can mount them (docker), so the
	// coordinator sees what its workers will be given.
	HostPaths HostPaths
	Logger    *slog.Logger
}

// CoordinatorMachine is the one machine a detached run's coordinator runs
// on. Its Channel is the same a worker's machine has.
type CoordinatorMachine interface {
	Channel
	// ID names the machine in the detached run's status.
	ID() string
	// WorkDir is a folder on the machine the coordinator may use: the
	// launching mst copies the bundle to WorkDir/detached/ID.
	WorkDir() string
	// MST is the command that runs mst on the machine.
	MST() []string
	// Env are KEY=value pairs the coordinator's commands get on top of the
	// machine's own environment (DOCKER_HOST inside a container, say);
	// none is a secret.
	Env() []string
	// Finish is the command the coordinator runs on its machine as its
	// very last step, on failure too (typically one that deletes the
	// machine); nil when nothing needs doing.
	Finish() []string
	// Identity says, for people, what the machine runs as and can reach
	// (the Docker socket, an SSH key of its own, a service account).
	Identity() string
	// Dispose deletes the machine when the coordinator could not be
	// started on it. It is safe to call more than once.
	Dispose(ctx context.Context) error
}

// CoordinatorPIDFile is the file in a coordinator machine's WorkDir where
// the coordinator, once it runs, writes its process id (decimal, then a
// newline; written to a temporary file and renamed). The coordinator leads
// a session of its own, so a runner's watchdog that ends it at the
// machine's deadline signals that process group and session.
const CoordinatorPIDFile = "coordinator.pid"

// A CoordinatorMachine that also is an io.Closer holds a connection (SSH)
// that the launching mst closes once the coordinator has started.

// CreateCoordinator makes a detached run's coordinator machine.
type CreateCoordinator func(ctx context.Context, p CoordinatorParams) (CoordinatorMachine, error)

// DefaultCoordinatorDeadline is how long a coordinator machine lives at
// most when the run gives no deadline of its own.
const DefaultCoordinatorDeadline = 24 * time.Hour

// nonDNS matches the runs of characters a DNS label cannot hold.
var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// CoordinatorName names a detached run's coordinator machine where names
// are DNS labels (a pod, a VM): mst-coordinator-ID lower-cased, every run
// of other characters replaced by '-', at most 63 long. An id too long to
// fit is cut, and a hash of the whole id keeps such names apart; an id of
// no usable character is its hash.
func CoordinatorName(id string) string {
	const prefix = "mst-coordinator-"
	s := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(id), "-"), "-")
	sum := sha256.Sum256([]byte(id))
	switch room := 63 - len(prefix); {
	case s == "":
		s = hex.EncodeToString(sum[:3])
	case len(s) > room:
		s = strings.TrimRight(s[:room-7], "-") + "-" + hex.EncodeToString(sum[:3])
	}
	return prefix + s
}
