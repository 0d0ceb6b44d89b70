// Package runlock gives a folder one owner at a time: the owner holds a
// lock on a file in it for as long as it writes there, and the operating
// system drops the lock when the owner's process ends, however it ends (a
// crash, SIGKILL, a power cut), so a dead owner never keeps a folder.
//
// The lock file also holds who owns it (pid, host, start time) for
// messages. Readers test the lock without taking it, so a reader never gets
// in the way of an owner. On Linux the lock is an open-file-description
// lock (fcntl F_OFD_SETLK), which works between goroutines of one process as
// between processes; on other Unix systems it is flock(2).
package runlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// Owner is who holds a lock.
type Owner struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
	// What says what the owner is doing (mst run, mst collect).
	What string `json:"what,omitempty"`
}

func (o Owner) String() string {
	s := fmt.Sprintf("pid %d on host %s", o.PID, o.Host)
	if o.What != "" {
		s = o.What + ", " + s
	}
	if !o.Started.IsZero() {
		s += ", since " + o.Started.Local().Format("2006-01-02 15:04:05")
	}
	return s
}

// Self is this process as an owner doing what.
func Self(what string, now time.Time) Owner {
	host, _ := os.Hostname()
	return Owner{PID: os.Getpid(), Host: host, Started: now.UTC(), What: what}
}

// ErrBusy means another owner holds the lock.
var ErrBusy = errors.New("in use")

// BusyError says who holds a lock that was wanted.
type BusyError struct {
	Path string
	// Owner is who holds it, as its lock file says (zero when it has not
	// written itself in yet).
	Owner Owner
}

func (e *BusyError) Error() string {
	if e.Owner.PID == 0 {
		return fmt.Sprintf("%s is held by another process", e.Path)
	}
	return fmt.Sprintf("%s is held by %s", e.Path, e.Owner)
}

func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Lock is a held lock.
type Lock struct {
	f *os.File
}

// Acquire takes the lock file at path for owner, or fails with a
// *BusyError (errors.Is ErrBusy) when someone holds it. It never waits.
func Acquire(path string, owner Owner) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	ok, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !ok {
		f.Close()
		o, _ := readOwner(path)
		return nil, &BusyError{Path: path, Owner: o}
	}
	// The owner record is what tells the next comer who holds the lock;
	// a lock whose record could not be written is let go.
	b, err := json.Marshal(owner)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: writing its owner: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release lets the lock go. The file stays, naming its last owner.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	uerr := unlock(l.f)
	err := l.f.Close()
	l.f = nil
	if uerr != nil {
		return uerr
	}
	return err
}

// Holder says whether someone holds the lock at path, and who, as the
// lock file says. The last owner is returned when no one holds it (zero
// when there is no lock file). It takes nothing.
func Holder(path string) (owner Owner, held bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Owner{}, false, nil
	}
	if err != nil {
		return Owner{}, false, err
	}
	defer f.Close()
	held, err = isLocked(f)
	if err != nil {
		return Owner{}, false, fmt.Errorf("testing the lock %s: %w", path, err)
	}
	o, _ := readOwner(path)
	return o, held, nil
}

func readOwner(path string) (Owner, error) {
	var o Owner
	b, err := os.ReadFile(path)
	if err != nil {
		return o, err
	}
	err = json.Unmarshal(b, &o)
	return o, err
}
