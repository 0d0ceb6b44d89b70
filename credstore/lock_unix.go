//go:build unix

package credstore

import (
	"errors"
	"os"
	"syscall"
)

func lockSupported() error { return nil }

// tryLock takes flock(2)'s exclusive lock on f if it is free.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}

// lock waits for flock(2)'s exclusive lock on f.
func lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// unlock lets the lock go on the open file itself, whoever else still
// holds a descriptor of it (a child between fork and exec).
func unlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
