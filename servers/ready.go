package servers

import (
	"context"
	"errors"
	"sync"
)

// Ready is the readiness check MST makes once before the first trial: every
// server connects and lists at least one tool. Servers are checked at the
// same time; the error joins one line per server that failed, each naming
// the server and what it printed.
func Ready(ctx context.Context, list []Server) error {
	var (
		mu   sync.Mutex
		errs = make([]error, len(list))
		wg   sync.WaitGroup
	)
	for i, s := range list {
		wg.Go(func() {
			c, err := Connect(ctx, s)
			if err != nil {
				mu.Lock()
				errs[i] = err
				mu.Unlock()
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
