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

// lease is a lock kept in a bucket under one prefix: the run's lock
// (PREFIX/EVAL/runs/ID/locks/), or any other (Store.Lease).
type lease struct {
	s *Store
	// dir is the key prefix of the lock objects, ending in "/"; what
	// names the lock in messages ("the run's lock"); where is the URL
	// errors name.
	dir, what, where string
}

func (l lease) name(n int) string { return fmt.Sprintf("%s%010d.json", l.dir, n) }

func (l lease) fail(doing string, err error) error { return describe(l.where, doing, err) }

// latest returns the number and content of the highest lock object,
// n = 0 when there is none.
func (l lease) latest(ctx context.Context) (int, leaseRecord, error) {
	n, err := l.top(ctx, nil)
	if err != nil || n == 0 {
		return 0, leaseRecord{}, err
	}
	rec, err := l.read(ctx, n)
	return n, rec, err
}

// top returns the number of the highest lock object, 0 when there is
// none, its listing bound by limits (nil: the store's).
func (l lease) top(ctx context.Context, limits *Limits) (int, error) {
	n := 0
	err := l.s.list(ctx, &blob.ListOptions{Prefix: l.dir}, limits, func(o *blob.ListObject) error {
		base, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, l.dir), ".json")
		if m, err := strconv.Atoi(base); ok && err == nil && m > n {
			n = m
		}
		return nil
	})
	if err != nil {
		return 0, l.fail("reading "+l.what, err)
	}
	return n, nil
}

func (l lease) read(ctx context.Context, n int) (leaseRecord, error) {
	b, err := l.s.get(ctx, l.name(n), -1)
	if code(err) == gcerrors.NotFound {
		return leaseRecord{}, fmt.Errorf("%s: %w", l.s.urlOf(l.name(n)), store.ErrNotFound)
	}
	if err != nil {
		return leaseRecord{}, describe(l.s.urlOf(l.name(n)), "reading", err)
	}
	var rec leaseRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return leaseRecord{}, fmt.Errorf("%s: %w", l.s.urlOf(l.name(n)), err)
	}
	return rec, nil
}

func (l lease) write(ctx context.Context, doing string, n int, rec leaseRecord, ifNotExist bool, limits *Limits) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	opts := &blob.WriterOptions{IfNotExist: ifNotExist, ContentType: "application/json"}
	return l.s.put(ctx, doing, l.name(n), append(b, '\n'), opts, limits)
}

// take takes the lease for owner and keeps it renewed until release is
// called. It fails with a *store.BusyError naming the holder when a live
// lease is held by another.
func (l lease) take(ctx context.Context, owner transcript.Owner) (func() error, error) {
	n, rec, err := l.latest(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 && rec.live(l.s.now()) {
		return nil, &store.BusyError{Location: l.where, Owner: rec.Owner}
	}
	n++
	taking, renewing, releasing := "taking "+l.what, "renewing "+l.what, "releasing "+l.what
	mine := leaseRecord{Owner: owner, Renewed: l.s.now().UTC(), LeaseMs: l.s.lease.Milliseconds()}
	if err := l.write(ctx, taking, n, mine, true, nil); lost(err) {
		other, rerr := l.read(ctx, n)
		if rerr != nil {
			return nil, &store.BusyError{Location: l.where}
		}
		return nil, &store.BusyError{Location: l.where, Owner: other.Owner}
	} else if err != nil {
		return nil, l.fail(taking, err)
	}
	// The lease outlives ctx: a cancelled run still writes how it ended
	// before it lets the run go. Each renewal's listing and write must
	// each end within half the time between renewals, so a store that
	// stops answering never holds the renewals up (each failure is
	// reported through the store's OnRetry, and the renewal tried at the
	// next tick), nor the release: release stops the renewals at once,
	// mid-listing, but lets a renewal's write end (within its bound), so
	// that no renewal lands after the release.
	every := max(l.s.lease/3, time.Millisecond)
	within := l.s.limits.within(every / 2)
	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-t.C:
			}
			if top, err := l.top(renewCtx, &within); err == nil && top > n {
				return // taken over: see the comment at the top
			}
			if renewCtx.Err() != nil {
				return
			}
			mine.Renewed = l.s.now().UTC()
			l.write(context.WithoutCancel(renewCtx), renewing, n, mine, false, &within) // a failed renewal is tried at the next tick
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
			half := l.s.limits.within(l.s.limits.Call / 2)
			if top, err := l.top(bg, &half); err == nil && top > n {
				return // another holds it now
			}
			mine.Released = true
			if err := l.write(bg, releasing, n, mine, false, &half); err != nil {
				rerr = l.fail(releasing, err)
			}
		})
		return rerr
	}, nil
}

// holder reads the highest lease: its owner, and whether it holds.
func (l lease) holder(ctx context.Context) (transcript.Owner, bool, error) {
	n, rec, err := l.latest(ctx)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return transcript.Owner{}, false, nil
		}
		return transcript.Owner{}, false, err
	}
	if n == 0 {
		return transcript.Owner{}, false, nil
	}
	return rec.Owner, rec.live(l.s.now()), nil
}

func (r *Run) lease() lease {
	return lease{s: r.s, dir: r.key(locksDir + "/"), what: "the run's lock", where: r.Location()}
}

// Lock takes the run's lease for owner and keeps it renewed until release
// is called. It fails with a *store.BusyError naming the holder when a
// live lease is held by another.
func (r *Run) Lock(ctx context.Context, owner transcript.Owner) (func() error, error) {
	return r.lease().take(ctx, owner)
}

// Holder reads the highest lease: its owner, and whether it holds.
func (r *Run) Holder(ctx context.Context) (transcript.Owner, bool, error) {
	return r.lease().holder(ctx)
}

// Lease takes the lock kept under key (a prefix of the store's bucket,
// which it holds alone) for owner, as a run's lock is taken: it holds
// while its holder renews it, a lease after its holder's process ended at
// most, and until release is called. what names it in messages ("the
// lock on server X's grant"). It fails with a *store.BusyError naming
// the holder when a live lease is held by another; the caller waits and
// tries again.
func (s *Store) Lease(ctx context.Context, key, what string, owner transcript.Owner) (release func() error, err error) {
	key = strings.TrimSuffix(key, "/") + "/"
	return lease{s: s, dir: key, what: what, where: s.urlOf(key)}.take(ctx, owner)
}

// LeaseTime is how long the store's leases hold without a renewal.
func (s *Store) LeaseTime() time.Duration { return s.lease }

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
