package providertest

import (
	"context"
	"sync"
	"time"
)

// Gate makes a test of concurrency wait on the event it checks (several
// conversations reaching the model at once) rather than on a latency long
// enough that they probably overlap. While the gate is shut, every request
// that a Conversation of the Script answers is held before its answer;
// requests no Conversation matches, faults and errors are not held. The
// gate opens, for good, when requests of Conversations different
// Conversations are held at the same time: all of them are then answered,
// and so is every later request. It also opens once Within has passed since
// the first request arrived at it, so that a client that never runs its
// conversations at once still ends; Server.Gathered then tells the test.
//
// A held request whose client goes away stops waiting and is not answered.
type Gate struct {
	// Conversations is how many different Conversations must have a
	// request held at once for the gate to open; 0 means no gate.
	Conversations int
	// Within bounds the wait, from the first request that reaches the
	// gate (2 minutes when zero).
	Within time.Duration
}

// defaultGateWithin is Gate.Within when zero.
const defaultGateWithin = 2 * time.Minute

// gate is a Gate at work.
type gate struct {
	need   int
	within time.Duration
	open   chan struct{}

	mu      sync.Mutex
	opened  bool
	timer   *time.Timer
	waiting map[int]int // conversation index → requests held
	most    int         // the most different conversations held at once
}

func newGate(g Gate) *gate {
	if g.Conversations <= 0 {
		return nil
	}
	if g.Within <= 0 {
		g.Within = defaultGateWithin
	}
	return &gate{need: g.Conversations, within: g.Within, open: make(chan struct{}), waiting: map[int]int{}}
}

// wait holds a request of conversation conv (-1: none) until the gate
// opens. It reports false when ctx ended first.
func (g *gate) wait(ctx context.Context, conv int) bool {
	if g == nil || conv < 0 {
		return true
	}
	g.mu.Lock()
	if g.opened {
		g.mu.Unlock()
		return true
	}
	if g.timer == nil {
		g.timer = time.AfterFunc(g.within, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.openLocked()
		})
	}
	g.waiting[conv]++
	g.most = max(g.most, len(g.waiting))
	if len(g.waiting) >= g.need {
		g.openLocked()
	}
	g.mu.Unlock()

	select {
	case <-g.open:
		return true
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.waiting[conv]--; g.waiting[conv] <= 0 {
			delete(g.waiting, conv)
		}
		return false
	}
}

func (g *gate) openLocked() {
	if g.opened {
		return
	}
	g.opened = true
	close(g.open)
}

// stop ends the gate's timer; held requests are released.
func (g *gate) stop() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
	}
	g.openLocked()
}

// gathered is the most different conversations held at once.
func (g *gate) gathered() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// Gathered reports the most different Conversations that had a request held
// at the Script's Gate at the same time: Gate.Conversations when they
// opened it, fewer when Gate.Within passed first. It is 0 without a Gate.
func (s *Server) Gathered() int {
	return s.gate.gathered()
}
