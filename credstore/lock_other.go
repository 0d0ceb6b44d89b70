//go:build !unix

package credstore

import (
	"errors"
	"os"
)

// Without flock(2) the local store cannot keep two processes from
// refreshing one grant at once, so it does not open.
func lockSupported() error {
	return errors.New("the local credential store needs flock(2), which this system lacks")
}

func tryLock(f *os.File) (bool, error) { return false, lockSupported() }
func lock(f *os.File) error            { return lockSupported() }
func unlock(f *os.File) error          { return nil }
