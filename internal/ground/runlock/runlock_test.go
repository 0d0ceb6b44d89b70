package runlock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A child started with holdEnv set takes the lock named by it, says
// "held", and keeps it until its stdin closes or it is killed.
const holdEnv = "RUNLOCK_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		l, err := Acquire(path, Self("test holder", time.Now()))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		io.Copy(io.Discard, os.Stdin)
		l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLockInProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.lock")
	if _, held, err := Holder(path); err != nil || held {
		t.Fatalf("Holder(no lock file) = held %v, %v; want not held", held, err)
	}
	me := Self("mst run", time.Now())
	l, err := Acquire(path, me)
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	o, held, err := Holder(path)
	if err != nil || !held || o.PID != os.Getpid() || o.Host != me.Host || o.What != "mst run" {
		t.Errorf("Holder while held = %+v, %v, %v; want this process, held", o, held, err)
	}
	// A second owner in the same process (another goroutine's open) is refused.
	_, err = Acquire(path, Self("mst run --resume", time.Now()))
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) || busy.Owner.PID != os.Getpid() || !strings.Contains(err.Error(), fmt.Sprint("pid ", os.Getpid())) {
		t.Errorf("second Acquire = %v, want a BusyError naming pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if o, held, _ := Holder(path); held || o.PID != os.Getpid() {
		t.Errorf("Holder after Release = %+v held %v, want not held, last owner this process", o, held)
	}
	l2, err := Acquire(path, me)
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	l2.Release()
}

// TestLockDeadOwner: a process that holds the lock and is killed releases
// it without doing anything.
func TestLockDeadOwner(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("holder said %q, want held", line)
	}
	o, held, err := Holder(path)
	if err != nil || !held || o.PID != cmd.Process.Pid {
		t.Errorf("Holder = %+v, %v, %v; want held by pid %d", o, held, err, cmd.Process.Pid)
	}
	if _, err := Acquire(path, Self("x", time.Now())); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), fmt.Sprint("pid ", cmd.Process.Pid)) {
		t.Errorf("Acquire while another process holds it = %v, want busy naming pid %d", err, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if o, held, err := Holder(path); err != nil || held || o.PID != cmd.Process.Pid {
		t.Errorf("Holder after the owner was killed = %+v, %v, %v; want not held, last owner pid %d", o, held, err, cmd.Process.Pid)
	}
	l, err := Acquire(path, Self("x", time.Now()))
	if err != nil {
		t.Fatalf("Acquire after the owner died = %v", err)
	}
	l.Release()
}
