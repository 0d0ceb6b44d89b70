package servers

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// Listed is what the readiness check found one server to have.
type Listed struct {
	Server string
	// Offered are the tools offered to the model, as Conn.Tools.
	Offered []Tool
	// Hidden are the names of the tools the server lists that the
	// variant hides from the model, sorted.
	Hidden []string
}

// Names returns the names of every tool the server lists: the offered
// ones, in the server's order, then the hidden ones.
func (l Listed) Names() []string {
	names := make([]string, 0, len(l.Offered)+len(l.Hidden))
	for _, t := range l.Offered {
		names = append(names, t.Name)
	}
	return append(names, l.Hidden...)
}

// Ready is the readiness check MST makes once before the first trial: every
// server connects and lists at least one tool. Servers are checked at the
// same time; the error joins one line per server that failed, each naming
// the server and what it printed.
func Ready(ctx context.Context, list []Server) error {
	_, err := ReadyTools(ctx, list)
	return err
}

// ReadyTools is Ready that also returns what each server lists, in the
// order of list, so a caller can check names against it (the graders'
// tools). On error the result holds the servers that passed, and zero
// entries for those that failed.
func ReadyTools(ctx context.Context, list []Server) ([]Listed, error) {
	listed, conns, err := ReadyConns(ctx, list)
	for _, c := range conns {
		c.Close()
	}
	return listed, err
}

// ReadyConns is ReadyTools that leaves the connections open, in the order
// of list (nil for a server that failed), for the caller to use or close:
// a worker hands each to the first trial that starts the same server, so
// that server starts once, not once for the check and again for the trial.
func ReadyConns(ctx context.Context, list []Server) ([]Listed, []*Conn, error) {
	var (
		errs   = make([]error, len(list))
		listed = make([]Listed, len(list))
		conns  = make([]*Conn, len(list))
		wg     sync.WaitGroup
	)
	for i, s := range list {
		wg.Go(func() {
			c, err := Connect(ctx, s)
			if err != nil {
				errs[i] = err
				return
			}
			conns[i] = c
			l := Listed{Server: s.Name, Offered: c.Tools}
			// Connect checked that every override names a listed tool.
			for name, o := range s.Tools {
				if o.Hidden {
					l.Hidden = append(l.Hidden, name)
				}
			}
			slices.Sort(l.Hidden)
			listed[i] = l
		})
	}
	wg.Wait()
	return listed, conns, errors.Join(errs...)
}
