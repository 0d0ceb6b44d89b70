//go:build !unix

package desktop

import (
	"context"
	"errors"
	"time"
)

// stopTimeout is how long an app gets to end before it is killed.
const stopTimeout = 10 * time.Second

// stopProcess is not built here: owned-desktop mode runs on Linux.
func stopProcess(ctx context.Context, pid int) error {
	return errors.New("stopping the app is not supported on this OS")
}
