package run

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// StopAfter is how many of a variant's first trials decide whether the
// variant is stopped. When all of them errored with one cause, and that
// cause is the provider or the client, the rest of the variant's trials
// are skipped: a missing key, a wrong base URL or a provider that answers
// 401 throughout would fail them all the same way.
const StopAfter = 3

// StoppedVariant is a variant whose remaining trials were skipped in this
// attempt; run.json keeps the list (transcript.Run.Stopped).
type StoppedVariant = transcript.StoppedVariant

// StopGate is the shard.Gate of a run: it watches the first trials of each
// variant as the coordinator takes them and stops a variant whose first
// StopAfter trials all errored with one provider or client cause.
//
// "First" means the order in which the coordinator takes the trials' reports
// (across every shard, each once its transcript is in the run folder), not
// the order the trials were planned or started in. Trials that run at once
// may report in any order, and those already granted when the variant is
// stopped run to their end, so a variant stopped with trials in flight ends
// with StopAfter or more errored trials: at most StopAfter plus the trials
// of it in flight at that moment (fewer than shards × concurrency). A
// run of one shard with concurrency 1 ends with exactly StopAfter, since its
// worker asks for the next trial only after reporting the last one.
//
// Only trials that ran count: skipped and cancelled ones say nothing of the
// variant. An error of the server or of the runner never stops a variant
// (it may be one machine's problem), and a variant any of whose first
// trials ended otherwise (answered, no answer, timed out, another cause)
// is never stopped in this attempt.
type StopGate struct {
	runID  string
	redact *secrets.Redactor

	mu       sync.Mutex
	variants map[string]*variantStart
	stopped  []StoppedVariant
}

var _ shard.Gate = (*StopGate)(nil)

// variantStart is what the gate knows of one variant's first trials.
type variantStart struct {
	seen    int    // trials counted so far, up to StopAfter
	cause   string // the cause they all errored with
	detail  string // the first one's message
	settled bool   // the first trials decided: stopped or never
	reason  string // set once stopped
}

// NewStopGate returns the gate of run runID; the reasons it gives name the
// run in the resume command, and the error messages it quotes are redacted
// with redact (which may be nil).
func NewStopGate(runID string, redact *secrets.Redactor) *StopGate {
	return &StopGate{runID: runID, redact: redact, variants: map[string]*variantStart{}}
}

// Admit is shard.Gate's: the reason a trial of a stopped variant is
// skipped, or "".
func (g *StopGate) Admit(key transcript.Key) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v := g.variants[key.Variant]; v != nil {
		return v.reason
	}
	return ""
}

// Observe counts a trial of variant that ended, with its status, its cause and its
// detail (the error message, "" when unknown).
func (g *StopGate) Observe(variant, status, cause, detail string) {
	switch status {
	case transcript.Skipped, transcript.Cancelled, "":
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.variants[variant]
	if v == nil {
		v = &variantStart{}
		g.variants[variant] = v
	}
	if v.settled {
		return
	}
	v.seen++
	stops := status == transcript.Errored && (cause == transcript.CauseProvider || cause == transcript.CauseClient)
	if !stops || (v.seen > 1 && cause != v.cause) {
		v.settled = true
		return
	}
	if v.seen == 1 {
		v.cause, v.detail = cause, g.shorten(detail)
	}
	if v.seen < StopAfter {
		return
	}
	v.settled = true
	v.reason = g.reasonOf(variant, v)
	g.stopped = append(g.stopped, StoppedVariant{Variant: variant, Cause: v.cause, Detail: v.detail, Reason: v.reason})
}

func (g *StopGate) reasonOf(variant string, v *variantStart) string {
	what := v.cause
	if v.detail != "" {
		what += ": " + v.detail
	}
	return fmt.Sprintf("variant %s stopped: its first %d trials all errored (%s); the other variants kept running. Once the cause is fixed, a resume of run %s runs the skipped trials (mst run prints the command)",
		variant, StopAfter, what, g.runID)
}

// Describe gives the error message of a trial of variant that Observe
// counted without one (it counts a trial as its worker reports it, before
// its transcript is back): the first one known is what a stop quotes.
func (g *StopGate) Describe(variant, detail string) {
	if detail == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.variants[variant]
	if v == nil || v.cause == "" || v.detail != "" {
		return
	}
	v.detail = g.shorten(detail)
	if v.reason == "" {
		return
	}
	v.reason = g.reasonOf(variant, v)
	for i := range g.stopped {
		if g.stopped[i].Variant == variant {
			g.stopped[i].Detail, g.stopped[i].Reason = v.detail, v.reason
		}
	}
}

// maxDetail bounds the error message a stop reason quotes, in runes.
const maxDetail = 200

// shorten keeps the first line of an error message, redacted, and at most
// maxDetail runes of it.
func (g *StopGate) shorten(detail string) string {
	detail = g.redact.String(detail)
	detail, _, _ = strings.Cut(strings.TrimSpace(detail), "\n")
	detail = strings.TrimSpace(detail)
	if utf8.RuneCountInString(detail) > maxDetail {
		detail = string([]rune(detail)[:maxDetail]) + "…"
	}
	return detail
}

// Stopped returns the variants stopped so far, in the order they stopped.
func (g *StopGate) Stopped() []StoppedVariant {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]StoppedVariant(nil), g.stopped...)
}

// gate returns the stop gate the collector feeds, making it on first use.
func (c *collector) gate(runID string, redact *secrets.Redactor) *StopGate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop == nil {
		c.stop = NewStopGate(runID, redact)
	}
	return c.stop
}

// stoppedVariants returns the variants this attempt stopped, in the order
// they stopped (none when the collector has no gate).
func (c *collector) stoppedVariants() []StoppedVariant {
	c.mu.Lock()
	g := c.stop
	c.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Stopped()
}

// Reported counts a trial towards stopping its variant as its worker
// reports it, in the shard's message loop (shard.Reporter): before the
// shard's next trial can be granted, so a stop takes effect at once
// however long the transcript takes to come back.
func (c *collector) Reported(shardIndex int, m *protocol.Trial) {
	c.observe(m.Key, m.Status, m.Cause, "")
	if m.Path == "" {
		// The worker could not store the transcript.
		c.outage.failed()
	}
}

// describe gives the stop gate a trial's error message once its
// transcript is back.
func (c *collector) describe(key transcript.Key, detail string) {
	c.mu.Lock()
	g := c.stop
	c.mu.Unlock()
	if g != nil {
		g.Describe(key.Variant, detail)
	}
}

// observe feeds a reported trial to the stop gate, if there is one.
func (c *collector) observe(key transcript.Key, status, cause, detail string) {
	c.mu.Lock()
	g := c.stop
	c.mu.Unlock()
	if g != nil {
		g.Observe(key.Variant, status, cause, detail)
	}
}
