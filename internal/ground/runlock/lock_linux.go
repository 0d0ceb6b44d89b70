package runlock

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// Open-file-description locks (Linux 3.15 and later): owned by the open
// file, not the process, so two opens in one process exclude each other,
// and released when the file's last descriptor closes.
const (
	fOFDGetlk = 36
	fOFDSetlk = 37
)

func whole(typ int16) *syscall.Flock_t {
	return &syscall.Flock_t{Type: typ, Whence: io.SeekStart}
}

func tryLock(f *os.File) (bool, error) {
	err := syscall.FcntlFlock(f.Fd(), fOFDSetlk, whole(syscall.F_WRLCK))
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return false, nil
	}
	return err == nil, err
}

func isLocked(f *os.File) (bool, error) {
	lk := whole(syscall.F_WRLCK)
	if err := syscall.FcntlFlock(f.Fd(), fOFDGetlk, lk); err != nil {
		return false, err
	}
	return lk.Type != syscall.F_UNLCK, nil
}

// unlock lets the lock go on the open file itself: a child process that
// was forked meanwhile, and holds the same open file until it execs, does
// not keep it held.
func unlock(f *os.File) error {
	return syscall.FcntlFlock(f.Fd(), fOFDSetlk, whole(syscall.F_UNLCK))
}
