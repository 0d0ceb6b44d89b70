//go:build unix

package runlock

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReleaseWithAnotherDescriptor: a child forked while the lock is held
// has a descriptor of the same open file until it execs. Release must let
// the lock go all the same, or the next run finds its own folder busy.
func TestReleaseWithAnotherDescriptor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	l, err := Acquire(path, Self("test", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	// A duplicate descriptor shares the open file, as a forked child's does.
	dup, err := syscall.Dup(int(l.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, held, err := Holder(path); err != nil || held {
		t.Fatalf("Holder after Release with another descriptor open = held %v, %v; want free", held, err)
	}
	l2, err := Acquire(path, Self("test", time.Now()))
	if err != nil {
		t.Fatalf("Acquire after Release = %v, want the lock", err)
	}
	l2.Release()
}
