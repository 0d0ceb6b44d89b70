package run

import (
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/engine/report"
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
	return NewProgressWidth(w, terminal, nil)
}

// NewProgressWidth is NewProgress for a terminal whose width, in
// characters, width says (0 or a nil width: no limit): the live line is
// shortened to fit it, so that redrawing it in place never wraps. width is
// asked at every redraw, so a resized terminal is followed.
func NewProgressWidth(w io.Writer, terminal bool, width func() int) Progress {
	return &progress{w: w, terminal: terminal, now: time.Now, width: width}
}

type progress struct {
	w        io.Writer
	terminal bool
	now      func() time.Time
	width    func() int

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
	width := 0
	if p.width != nil {
		width = p.width()
	}
	line := fmt.Sprintf("run %s: %d trials (%d cases × %d variants × %d trials)", transcript.Printable(run.ID), total, run.Cases, len(run.Variants), run.Trials)
	fmt.Fprintln(p.w, report.Wrap(line, width, "  "))
	if p.terminal {
		p.stop, p.stopped = make(chan struct{}), make(chan struct{})
		go p.redraw()
	}
}

// StartGrading starts a second count, of trials graded on a runner
// (mst run --grade-runner) once every trial was collected.
func (p *progress) StartGrading(on string, total int) {
	p.mu.Lock()
	p.total, p.started = total, p.now()
	p.done, p.graded, p.passed, p.errored, p.lastTenth = 0, 0, 0, 0, 0
	p.mu.Unlock()
	fmt.Fprintf(p.w, "grading %d trials on the runner %s\n", total, on)
	if p.terminal {
		p.stop, p.stopped = make(chan struct{}), make(chan struct{})
		go p.redraw()
	}
}

// gradingProgress is a Progress that can show grading on a runner apart.
type gradingProgress interface {
	StartGrading(on string, total int)
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
			fmt.Fprintf(p.w, "\r\x1b[K%s", p.fitted())
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

// fitted is the live line within the terminal's width, less one column
// so that the cursor never wraps to the next line; p.mu is held.
func (p *progress) fitted() string {
	width := 0
	if p.width != nil {
		width = p.width()
	}
	full := p.line()
	if width <= 0 || utf8.RuneCountInString(full) < width {
		return full
	}
	short := p.shortLine()
	if n := utf8.RuneCountInString(short); n < width {
		return short
	}
	r := []rune(short)
	return string(r[:max(width-1, 1)])
}

// shortLine is the progress in as few characters as it can say it: done
// and total, pass rate, time left, errors; p.mu is held.
func (p *progress) shortLine() string {
	pass := "–"
	if p.graded > 0 {
		pass = fmt.Sprintf("%.0f%%", 100*float64(p.passed)/float64(p.graded))
	}
	s := fmt.Sprintf("%d/%d pass %s eta %s", p.done, p.total, pass, p.eta())
	if p.errored > 0 {
		s += fmt.Sprintf(" err %d", p.errored)
	}
	return s
}

// eta is the time the run still needs at the pace so far; p.mu is held.
func (p *progress) eta() string {
	elapsed := p.now().Sub(p.started)
	switch {
	case p.done > 0 && p.done < p.total:
		return clock(time.Duration(float64(elapsed) / float64(p.done) * float64(p.total-p.done)))
	case p.done == p.total:
		return "0:00"
	}
	return "–"
}

// line is the progress in words; p.mu is held.
func (p *progress) line() string {
	elapsed := p.now().Sub(p.started)
	pass := "–"
	if p.graded > 0 {
		pass = fmt.Sprintf("%.0f%%", 100*float64(p.passed)/float64(p.graded))
	}
	eta := p.eta()
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
		fmt.Fprintf(p.w, "\r\x1b[K%s\n", p.fitted())
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
