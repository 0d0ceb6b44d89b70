package shard

import "context"

// AcquireProvider takes room for one request to the named provider made
// outside a trial (a judge's), under the same cap limits.providers puts
// on trials, and returns the function that gives it back. A provider
// without a cap, or a nil Limiter, takes no room.
func (l *Limiter) AcquireProvider(ctx context.Context, provider string) (release func(), err error) {
	got, err := l.acquire(ctx, []string{provider}, nil)
	if err != nil {
		return nil, err
	}
	return func() {
		for _, s := range got {
			s.release()
		}
	}, nil
}
