package runner

import (
	"context"
	"io"
)

// Channel is how the coordinator reaches a machine: run a command with its
// stdin and stdout attached, and copy folders and files both ways. Docker
// (exec -i, cp), SSH (exec, sftp) and Kubernetes (exec -i, cp) all give
// these three operations.
//
// Methods may be called from several goroutines at once.
type Channel interface {
	// Exec runs argv on the machine. stdin feeds the command's stdin and
	// the command's stdout goes to stdout; its stderr goes to stderr. Exec
	// returns when the command has exited (or ctx ended and it was stopped).
	Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error
	// CopyTo copies the local folder localDir to remoteDir on the machine,
	// creating remoteDir.
	CopyTo(ctx context.Context, localDir, remoteDir string) error
	// CopyFrom copies one file or folder from the machine to localPath.
	CopyFrom(ctx context.Context, remotePath, localPath string) error
}

// PortForwarder is implemented by channels that can forward a port of the
// machine to this one (a live view of a desktop, say).
type PortForwarder interface {
	// ForwardPort makes the machine's port reachable at the returned local
	// address until stop is called.
	ForwardPort(ctx context.Context, port int) (addr string, stop func() error, err error)
}

// Machine is one machine a runner created for one shard.
type Machine interface {
	Channel
	// ID names the machine in logs and run.json.
	ID() string
	// WorkDir is a folder on the machine the shard may use.
	WorkDir() string
	// MST is the command that runs mst on the machine; the worker's
	// arguments are appended to it.
	MST() []string
	// Image describes what the machine runs (an image reference and
	// digest), or "" when there is nothing to say.
	Image() string
	// Remove deletes the machine. It is safe to call more than once.
	Remove(ctx context.Context) error
}

// CreateMachine makes the machine for one shard.
type CreateMachine func(ctx context.Context, shardIndex int) (Machine, error)
