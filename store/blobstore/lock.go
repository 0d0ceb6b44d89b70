package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// A bucket has no lock that its holder's death lets go, so a run's lock
// is a lease. Each taking of the lock is a new object locks/N.json, N one
// more than the last, written on the condition that it is not there: of
// many takers of N, one wins. The object with the highest N says who holds
// the run: its holder rewrites it every third of the lease to say it is
// still there, and marks it released when done. It holds while it is not
// released and was renewed less than a lease ago; a holder whose process
// ended lets the run go a lease later. A lease taken over (its holder
// stalled longer than the lease, a laptop asleep) is not told to its old
// holder at once: it sees a higher N at its next renewal and stops
// renewing, but writes it makes meanwhile still go through (transcripts
// are never overwritten; the run record may be).

// leaseRecord is the content of locks/N.json.
type leaseRecord struct {
	Owner transcript.Owner `json:"owner"`
	// Renewed is when the holder last said it holds the run, by its
	// clock; LeaseMs is how long that holds.
	Renewed  time.Time `json:"renewed"`
	LeaseMs  int64     `json:"leaseMs"`
	Released bool      `json:"released,omitempty"`
}

func (l leaseRecord) live(now time.Time) bool {
	return !l.Released && now.Before(l.Renewed.Add(time.Duration(l.LeaseMs)*time.Millisecond))
}

func lockName(n int) string { return fmt.Sprintf("%s/%010d.json", locksDir, n) }

// latestLease returns the number and content of the highest lock object,
// n = 0 when there is none.
func (r *Run) latestLease(ctx context.Context) (int, leaseRecord, error) {
	n, err := r.topLease(ctx, nil)
	if err != nil || n == 0 {
		return 0, leaseRecord{}, err
	}
	l, err := r.readLease(ctx, n)
	return n, l, err
}

// topLease returns the number of the highest lock object, 0 when there is
// none, its listing bound by limits (nil: the store's).
func (r *Run) topLease(ctx context.Context, limits *Limits) (int, error) {
	n := 0
	dir := r.key(locksDir + "/")
	err := r.s.list(ctx, &blob.ListOptions{Prefix: dir}, limits, func(o *blob.ListObject) error {
		base, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, dir), ".json")
		if m, err := strconv.Atoi(base); ok && err == nil && m > n {
			n = m
		}
		return nil
	})
	if err != nil {
		return 0, r.fail("reading the run's lock", err)
	}
	return n, nil
}

func (r *Run) readLease(ctx context.Context, n int) (leaseRecord, error) {
	b, err := r.read(ctx, lockName(n))
	if err != nil {
		return leaseRecord{}, err
	}
	var l leaseRecord
	if err := json.Unmarshal(b, &l); err != nil {
		return leaseRecord{}, fmt.Errorf("%s: %w", r.where(lockName(n)), err)
	}
	return l, nil
}

func (r *Run) writeLease(ctx context.Context, doing string, n int, l leaseRecord, ifNotExist bool, limits *Limits) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return r.writeWithin(ctx, doing, lockName(n), append(b, '\n'), ifNotExist, limits)
}

// Lock takes the run's lease for owner and keeps it renewed until release
// is called. It fails with a *store.BusyError naming the holder when a
// live lease is held by another.
func (r *Run) Lock(ctx context.Context, owner transcript.Owner) (func() error, error) {
	n, l, err := r.latestLease(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 && l.live(r.s.now()) {
		return nil, &store.BusyError{Location: r.Location(), Owner: l.Owner}
	}
	n++
	mine := leaseRecord{Owner: owner, Renewed: r.s.now().UTC(), LeaseMs: r.s.lease.Milliseconds()}
	if err := r.writeLease(ctx, "taking the run's lock", n, mine, true, nil); lost(err) {
		other, rerr := r.readLease(ctx, n)
		if rerr != nil {
			return nil, &store.BusyError{Location: r.Location()}
		}
		return nil, &store.BusyError{Location: r.Location(), Owner: other.Owner}
	} else if err != nil {
		return nil, r.fail("taking the run's lock", err)
	}
	// The lease outlives ctx: a cancelled run still writes how it ended
	// before it lets the run go. Each renewal's listing and write must
	// each end within half the time between renewals, so a store that
	// stops answering never holds the renewals up (each failure is
	// reported through the store's OnRetry, and the renewal tried at the
	// next tick), nor the release: release stops the renewals at once,
	// mid-listing, but lets a renewal's write end (within its bound), so
	// that no renewal lands after the release.
	every := max(r.s.lease/3, time.Millisecond)
	within := r.s.limits.within(every / 2)
	renewing, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-renewing.Done():
				return
			case <-t.C:
			}
			if top, err := r.topLease(renewing, &within); err == nil && top > n {
				return // taken over: see the comment at the top
			}
			if renewing.Err() != nil {
				return
			}
			mine.Renewed = r.s.now().UTC()
			r.writeLease(context.WithoutCancel(renewing), "renewing the run's lock", n, mine, false, &within) // a failed renewal is tried at the next tick
		}
	})
	var once sync.Once
	var rerr error
	return func() error {
		once.Do(func() {
			stopRenewing()
			wg.Wait()
			// Letting go is a listing and a write, each within half a
			// call's time.
			bg := context.WithoutCancel(ctx)
			half := r.s.limits.within(r.s.limits.Call / 2)
			if top, err := r.topLease(bg, &half); err == nil && top > n {
				return // another holds it now
			}
			mine.Released = true
			if err := r.writeLease(bg, "releasing the run's lock", n, mine, false, &half); err != nil {
				rerr = r.fail("releasing the run's lock", err)
			}
		})
		return rerr
	}, nil
}

// Holder reads the highest lease: its owner, and whether it holds.
func (r *Run) Holder(ctx context.Context) (transcript.Owner, bool, error) {
	n, l, err := r.latestLease(ctx)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return transcript.Owner{}, false, nil
		}
		return transcript.Owner{}, false, err
	}
	if n == 0 {
		return transcript.Owner{}, false, nil
	}
	return l.Owner, l.live(r.s.now()), nil
}

// describe wraps err, met doing something at where, with what a person can
// do about it.
func describe(where, doing string, err error) error {
	switch code(err) {
	case gcerrors.PermissionDenied:
		return fmt.Errorf("%s: %s: the credentials were refused (%w); %s", where, doing, err, credentialsHint(where))
	case gcerrors.Canceled, gcerrors.DeadlineExceeded:
		return fmt.Errorf("%s: %s: %w", where, doing, err)
	}
	return fmt.Errorf("%s: %s: %w", where, doing, err)
}

// credentialsHint says where MST takes a cloud's credentials from.
func credentialsHint(where string) string {
	switch {
	case strings.HasPrefix(where, "gs://"):
		return "MST uses Google application default credentials (gcloud auth application-default login, GOOGLE_APPLICATION_CREDENTIALS, or the machine's service account): give that identity the Storage Object User role (storage.objects.create, get, list, delete) on the bucket"
	case strings.HasPrefix(where, "s3://"):
		return "MST uses the AWS default credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, SSO, or the machine's role): let that identity s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on the bucket"
	}
	return "check the credentials this machine has for the bucket"
}
