package run

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mst-eval/mst/report"
	"github.com/mst-eval/mst/transcript"
)

// Progress follows a run. Trial may be called from any goroutine.
type Progress interface {
	Start(run transcript.Run, total int)
	Trial(r report.Trial)
	Finish()
}

// NewProgress returns a live one-line display for a terminal, or plain log
// lines (at every tenth of the run, and at most every 10 s otherwise) when
// w is not a terminal.
func NewProgress(w io.Writer, terminal bool) Progress {
	return &progress{w: w, terminal: terminal, now: time.Now}
}

type progress struct {
	w        io.Writer
	terminal bool
	now      func() time.Time

	mu        sync.Mutex
	total     int
	done      int
	graded    int
	passed    int
	errored   int
	started   time.Time
	lastLine  time.Time
	lastTenth int
	stop      chan struct{}
	stopped   chan struct{}
}

func (p *progress) Start(run transcript.Run, total int) {
	p.mu.Lock()
	p.total, p.started = total, p.now()
	p.mu.Unlock()
	fmt.Fprintf(p.w, "run %s: %d trials (%d cases × %d variants × %d trials)\n", transcript.Printable(run.ID), total, run.Cases, len(run.Variants), run.Trials)
	if p.terminal {
		p.stop, p.stopped = make(chan struct{}), make(chan struct{})
		go p.redraw()
	}
}

func (p *progress) redraw() {
	defer close(p.stopped)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			fmt.Fprintf(p.w, "\r\x1b[K%s", p.line())
			p.mu.Unlock()
		}
	}
}

func (p *progress) Trial(r report.Trial) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if r.Graded {
		p.graded++
		if r.Passed {
			p.passed++
		}
	}
	if r.Status == transcript.Errored {
		p.errored++
		if !p.terminal {
			fmt.Fprintf(p.w, "  %s errored (%s)\n", r.Key, transcript.Printable(r.Cause)) // (Key.String escapes its names)
		}
	}
	if p.terminal {
		return
	}
	tenth := 0
	if p.total > 0 {
		tenth = p.done * 10 / p.total
	}
	now := p.now()
	if tenth > p.lastTenth || now.Sub(p.lastLine) >= 10*time.Second {
		p.lastTenth, p.lastLine = tenth, now
		fmt.Fprintln(p.w, p.line())
	}
}

// line is the progress in words; p.mu is held.
func (p *progress) line() string {
	elapsed := p.now().Sub(p.started)
	pass := "–"
	if p.graded > 0 {
		pass = fmt.Sprintf("%.0f%%", 100*float64(p.passed)/float64(p.graded))
	}
	eta := "–"
	if p.done > 0 && p.done < p.total {
		eta = clock(time.Duration(float64(elapsed) / float64(p.done) * float64(p.total-p.done)))
	} else if p.done == p.total {
		eta = "0:00"
	}
	s := fmt.Sprintf("%d/%d trials  pass %s (%d/%d)  elapsed %s  eta %s", p.done, p.total, pass, p.passed, p.graded, clock(elapsed), eta)
	if p.errored > 0 {
		s += fmt.Sprintf("  errored %d", p.errored)
	}
	return s
}

func (p *progress) Finish() {
	if p.terminal && p.stop != nil {
		close(p.stop)
		<-p.stopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		fmt.Fprintf(p.w, "\r\x1b[K%s\n", p.line())
	} else if p.lastTenth < 10 {
		fmt.Fprintln(p.w, p.line())
	}
}

func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
