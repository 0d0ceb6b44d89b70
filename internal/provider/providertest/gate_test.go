package providertest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestGateOpensWhenGathered: requests of one conversation wait, however
// many, until a request of a second conversation arrives; then all are
// let through, and so is every later request.
func TestGateOpensWhenGathered(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newGate(Gate{Conversations: 2, Within: time.Hour})
		passed := make(chan int, 4)
		for range 2 {
			go func() {
				if g.wait(t.Context(), 0) {
					passed <- 0
				}
			}()
		}
		synctest.Wait()
		if len(passed) != 0 {
			t.Fatalf("%d requests of one conversation passed a gate that needs two", len(passed))
		}
		if !g.wait(t.Context(), -1) {
			t.Errorf("a request of no conversation was held")
		}
		go func() {
			if g.wait(t.Context(), 1) {
				passed <- 1
			}
		}()
		synctest.Wait()
		if len(passed) != 3 {
			t.Fatalf("%d requests passed once two conversations were held, want 3", len(passed))
		}
		if !g.wait(t.Context(), 0) {
			t.Errorf("a request after the gate opened was held")
		}
		if got := g.gathered(); got != 2 {
			t.Errorf("gathered() = %d, want 2", got)
		}
	})
}

// TestGateOpensAfterWithin: a conversation alone is let through once
// Within has passed since it arrived, and gathered() says it was alone.
func TestGateOpensAfterWithin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newGate(Gate{Conversations: 2})
		start := time.Now()
		if !g.wait(t.Context(), 0) {
			t.Fatal("wait = false, want the request let through")
		}
		if waited := time.Since(start); waited != defaultGateWithin {
			t.Errorf("the request waited %v, want Within (%v)", waited, defaultGateWithin)
		}
		if got := g.gathered(); got != 1 {
			t.Errorf("gathered() = %d, want 1", got)
		}
	})
}

// TestGateClientGoesAway: a held request whose client goes away stops
// waiting and no longer counts towards opening the gate.
func TestGateClientGoesAway(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newGate(Gate{Conversations: 2, Within: time.Hour})
		ctx, cancel := context.WithCancel(t.Context())
		gone := make(chan bool, 1)
		go func() { gone <- g.wait(ctx, 0) }()
		synctest.Wait()
		cancel()
		if <-gone {
			t.Errorf("wait = true after the client went away, want false")
		}
		passed := make(chan bool, 1)
		go func() { passed <- g.wait(t.Context(), 1) }()
		synctest.Wait()
		if len(passed) != 0 {
			t.Errorf("the gate opened with one conversation held: the one that went away still counted")
		}
		g.stop()
		if !<-passed {
			t.Errorf("wait = false after stop, want the request let through")
		}
	})
}

// TestGateOverHTTP: with a gate of three conversations, three clients in
// three formats each get their own conversation's answer, and the server
// reports that all three were gathered.
func TestGateOverHTTP(t *testing.T) {
	t.Parallel()
	var convs []Conversation
	for _, w := range []string{"alpha", "beta", "gamma"} {
		convs = append(convs, Conversation{Match: w, Turns: []Turn{{Text: "answer " + w}}})
	}
	srv := New(t, Script{Conversations: convs, Gate: Gate{Conversations: 3}})
	bodies := map[string]struct{ path, body string }{
		"alpha": {"/v1/messages", strings.ReplaceAll(anthropicBody, `"hi"`, `"alpha"`)},
		"beta":  {"/v1/responses", strings.ReplaceAll(responsesBody, `"hi"`, `"beta"`)},
		"gamma": {"/v1/chat/completions", strings.ReplaceAll(chatBody, `"hi"`, `"gamma"`)},
	}
	var wg sync.WaitGroup
	for w, b := range bodies {
		wg.Go(func() {
			status, body, err := send(t.Context(), http.MethodPost, srv.URL+b.path, b.body)
			if err != nil || status != http.StatusOK || !strings.Contains(string(body), "answer "+w) {
				t.Errorf("POST %s (%s) = %d %s, %v, want its own answer", b.path, w, status, body, err)
			}
		})
	}
	wg.Wait()
	if got := srv.Gathered(); got != 3 {
		t.Errorf("Gathered() = %d, want 3", got)
	}
	if got := srv.MaxInFlight(); got != 3 {
		t.Errorf("MaxInFlight() = %d, want 3: the gate held the first two until the third came", got)
	}
	if got := New(t, Script{}).Gathered(); got != 0 {
		t.Errorf("Gathered() without a gate = %d, want 0", got)
	}
}
