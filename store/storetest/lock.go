package storetest

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

func owner(pid int) transcript.Owner {
	return transcript.Owner{PID: pid, Host: "host-" + strings.Repeat("x", pid%3), Started: started}
}

// testLock: a run has one writer. While one holds it, another Lock (of
// the same run opened again) fails naming the owner, readers see the run
// live, and once it is released the run is free and a record left saying
// running reads as interrupted.
func testLock(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := create(t, s, "run-1", nil)
	rec := runRecord("run-1", 1)
	rec.Collect = transcript.CollectRunning
	rec.Owner = &transcript.Owner{PID: os.Getpid(), Host: "here", Started: started}
	if err := r.WriteRun(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, live, err := r.Holder(ctx); err != nil || live {
		t.Errorf("Holder of a run no one holds = live %v, %v; want not live", live, err)
	}
	if got, err := r.ReadRun(ctx); err != nil || got.Collect != transcript.CollectInterrupted || !strings.Contains(got.Note, "here") {
		t.Errorf("ReadRun of a running record with no owner = %q note %q, %v; want interrupted, naming the owner it records", got.Collect, got.Note, err)
	}
	release, err := r.Lock(ctx, owner(101))
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	other, err := s.Open(ctx, "run-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Lock(ctx, owner(202))
	var busy *store.BusyError
	if !errors.Is(err, store.ErrBusy) || !errors.As(err, &busy) || busy.Owner.PID != 101 || !strings.Contains(err.Error(), "pid 101") || !strings.Contains(err.Error(), owner(101).Host) {
		t.Errorf("Lock of a held run = %v, want ErrBusy naming pid 101 on %s", err, owner(101).Host)
	}
	if o, live, err := other.Holder(ctx); err != nil || !live || o.PID != 101 {
		t.Errorf("Holder of a held run = %+v live %v, %v; want pid 101, live", o, live, err)
	}
	if got, err := other.ReadRun(ctx); err != nil || got.Collect != transcript.CollectRunning {
		t.Errorf("ReadRun of a held running run = %q, %v; want running", got.Collect, err)
	}
	if err := release(); err != nil {
		t.Fatalf("release = %v", err)
	}
	if _, live, err := other.Holder(ctx); err != nil || live {
		t.Errorf("Holder after release = live %v, %v; want not live", live, err)
	}
	if got, _ := other.ReadRun(ctx); got.Collect != transcript.CollectInterrupted {
		t.Errorf("ReadRun of a running record after its owner let go = %q, want interrupted", got.Collect)
	}
	rel2, err := other.Lock(ctx, owner(202))
	if err != nil {
		t.Fatalf("Lock after release = %v", err)
	}
	rel2()
	// Runs are locked apart.
	r2 := create(t, s, "run-2", nil)
	relA, err := r.Lock(ctx, owner(1))
	if err != nil {
		t.Fatal(err)
	}
	defer relA()
	relB, err := r2.Lock(ctx, owner(2))
	if err != nil {
		t.Errorf("Lock of run-2 while run-1 is held = %v, want nil", err)
	} else {
		relB()
	}
}

// testLockConcurrent: of many writers that want a run at once, one gets it.
func testLockConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, "run-1", nil)
	const n = 16
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		won      []int
		releases []func() error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			r, err := s.Open(ctx, "run-1", nil)
			if err != nil {
				t.Error(err)
				return
			}
			<-start
			rel, err := r.Lock(ctx, owner(1000+i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, i)
				releases = append(releases, rel)
			case !errors.Is(err, store.ErrBusy):
				t.Errorf("Lock by writer %d = %v, want nil or ErrBusy", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(won) != 1 {
		t.Errorf("%d writers wanted the run at once: %v got it, want exactly one", n, won)
	}
	for _, rel := range releases {
		rel()
	}
}
