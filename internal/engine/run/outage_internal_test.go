package run

import (
	"errors"
	"testing"
	"time"
)

// TestOutage: a run stops for its store only when at least three trials in
// a row could not be stored and the first of them was the limit ago; a
// trial stored in between starts the count again; it stops once.
func TestOutage(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var causes []error
	o := &outage{location: "gs://b/p", limit: time.Minute, now: func() time.Time { return clock },
		stop: func(err error) { causes = append(causes, err) }}
	step := func(d time.Duration) { clock = clock.Add(d) }

	o.failed()
	step(2 * time.Minute)
	o.failed() // two in a row, long enough: not yet
	if len(causes) != 0 {
		t.Fatalf("stopped after 2 trials not stored: %v", causes)
	}
	o.stored() // the store came back
	o.failed()
	o.failed()
	step(30 * time.Second)
	o.failed() // three in a row, 30s: not yet
	if len(causes) != 0 {
		t.Fatalf("stopped after 30s: %v", causes)
	}
	step(31 * time.Second)
	o.failed() // four in a row, 61s
	o.failed()
	var oe *StoreOutageError
	if len(causes) != 1 || !errors.As(causes[0], &oe) || oe.Trials != 4 || oe.For != 61*time.Second || oe.Location != "gs://b/p" {
		t.Fatalf("causes %v, want one StoreOutageError of 4 trials over 61s", causes)
	}
	var nilOutage *outage
	nilOutage.failed()
	nilOutage.stored()
}
