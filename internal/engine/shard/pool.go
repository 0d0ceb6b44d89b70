package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/servers"
)

// pool holds the open sessions of one variant. A concurrent client shares
// one session between all trials; any other client gets one session per
// trial in flight, each reused by later trials.
type pool struct {
	def    *client.Definition
	params client.OpenParams
	// proxied are the servers, secrets resolved, that the worker starts
	// behind its proxies for each trial, when the client takes them
	// (def.ProxiedServers); nil otherwise.
	proxied []servers.Server
	// maxCalls is the client's ToolCallLimit for these options (0: none).
	maxCalls int

	mu      sync.Mutex
	idle    []*pooled
	all     []*pooled
	shared  *pooled
	opening chan struct{} // closed when an Open of the shared session ends
	openErr error
}

type pooled struct {
	session client.Session
}

// get returns a session for one trial, opening one when needed. The open
// of a concurrent client's shared session happens once; if it fails, every
// trial waiting for it gets the same error.
func (p *pool) get(ctx context.Context) (*pooled, error) {
	if p.def.Concurrent {
		p.mu.Lock()
		if p.shared != nil {
			s := p.shared
			p.mu.Unlock()
			return s, nil
		}
		if p.opening != nil {
			ch := p.opening
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.shared != nil {
				return p.shared, nil
			}
			return nil, p.openErr
		}
		ch := make(chan struct{})
		p.opening = ch
		p.mu.Unlock()
		s, err := p.open(ctx)
		p.mu.Lock()
		p.shared, p.openErr, p.opening = s, err, nil
		if s != nil {
			p.all = append(p.all, s)
		}
		p.mu.Unlock()
		close(ch)
		return s, err
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	s, err := p.open(ctx)
	if s != nil {
		p.mu.Lock()
		p.all = append(p.all, s)
		p.mu.Unlock()
	}
	return s, err
}

func (p *pool) open(ctx context.Context) (*pooled, error) {
	if p.def.Open == nil {
		return &pooled{session: &oneShot{def: p.def, params: p.params}}, nil
	}
	s, err := p.def.Open(ctx, p.params)
	if err != nil {
		if s != nil {
			s.Close()
		}
		return nil, err
	}
	// Servers that resolve only once the session is open get the same
	// readiness check as declared ones, now.
	if ls, ok := s.(client.LateServers); ok {
		list, err := ls.Servers(ctx)
		if err == nil {
			err = servers.Ready(ctx, list)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("checking the servers the session opened: %w", err)
		}
	}
	return &pooled{session: s}, nil
}

// put returns a session after a trial, acting on what the trial asked for.
func (p *pool) put(ctx context.Context, s *pooled, next client.Next, log *slog.Logger) {
	switch next {
	case client.Reset:
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		err := s.session.Reset(rctx)
		cancel()
		if err == nil {
			break
		}
		log.Warn("reset failed; closing the session", "err", err)
		fallthrough
	case client.Stop:
		p.drop(s)
		return
	}
	if !p.def.Concurrent {
		p.mu.Lock()
		p.idle = append(p.idle, s)
		p.mu.Unlock()
	}
}

// drop closes s and forgets it; the next trial opens a new session.
func (p *pool) drop(s *pooled) {
	p.mu.Lock()
	if p.shared == s {
		p.shared = nil
	}
	for i, x := range p.all {
		if x == s {
			p.all = append(p.all[:i], p.all[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	s.session.Close()
}

func (p *pool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, s := range p.all {
		errs = append(errs, s.session.Close())
	}
	p.all, p.idle, p.shared = nil, nil, nil
	return errors.Join(errs...)
}

// oneShot wraps a run-only client in a session.
type oneShot struct {
	def    *client.Definition
	params client.OpenParams
}

func (o *oneShot) Run(ctx context.Context, t client.Trial) (client.Result, error) {
	return o.def.Run(ctx, o.params, t)
}
func (o *oneShot) Reset(context.Context) error { return nil }
func (o *oneShot) Close() error                { return nil }
