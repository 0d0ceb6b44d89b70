package runlock

import (
	"os"
	"strings"
	"testing"
)

// A lock whose owner record cannot be written is not taken: the next
// comer could not tell who holds it. Linux's /dev/full takes the lock but refuses
// to be cut to nothing or written.
func TestAcquireOwnerNotWritten(t *testing.T) {
	l, err := Acquire("/dev/full", Owner{PID: os.Getpid(), Host: "here"})
	if err == nil {
		l.Release()
		t.Fatal("Acquire on a file that refuses the owner record succeeded; want an error")
	}
	if !strings.Contains(err.Error(), "writing its owner") {
		t.Errorf("Acquire = %v; want it to say the owner could not be written", err)
	}
}
