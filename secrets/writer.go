package secrets

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// pendingLimit is how much of one line a Writer holds before it passes
// part of it on.
const pendingLimit = 64 << 10

// ErrClosed is returned by a Writer's Write after Close.
var ErrClosed = errors.New("secrets: write to a closed redacting writer")

// Writer redacts what is written to it and passes it to another writer. It
// holds back the end of the text that is not yet a whole line (a line ends
// with \n or \r, so a progress display redrawn with \r still moves), and
// passes on a line too long to hold only up to where no secret could be
// cut in two. Flush passes on whatever it holds. Its methods may be called
// from any goroutine; concurrent Writes are taken one after the other.
type Writer struct {
	r *Redactor
	// limit is pendingLimit, or less in tests.
	limit int

	mu      sync.Mutex
	w       io.Writer
	pending []byte
	err     error
}

// Writer returns a Writer that redacts on its way to w. Call Flush or Close
// when done, or the last partial line stays unwritten.
func (r *Redactor) Writer(w io.Writer) *Writer {
	return &Writer{r: r, w: w}
}

// Write takes all of p, passes on every whole line in what it holds, and
// returns len(p) unless an earlier or current write to the underlying
// writer failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	// What is held never has a line break (each break is passed on as it
	// comes, and no value holds one), so only p needs looking at.
	cut := 0
	if i := bytes.LastIndexAny(p, "\r\n"); i >= 0 {
		cut = len(w.pending) + i + 1
	}
	w.pending = append(w.pending, p...)
	limit := w.limit
	if limit <= 0 {
		limit = pendingLimit
	}
	if cut == 0 && len(w.pending) <= limit {
		return len(p), nil
	}
	pats := w.r.patterns()
	if len(w.pending)-cut > limit {
		// A long line with no end: keep back only what could be the start
		// of a value that has not fully arrived.
		cut = len(w.pending) - max(maxLen(pats)-1, 0)
	}
	if err := w.emit(cut, pats); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush passes on everything held, redacted.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.emit(len(w.pending), w.r.patterns())
}

// Close flushes; later writes fail with ErrClosed. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	err := w.Flush()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = ErrClosed
	}
	return err
}

// emit passes on pending[:cut] redacted, moving cut back to the start of
// any occurrence it would split, and keeps the rest; w.mu is held.
func (w *Writer) emit(cut int, pats []pattern) error {
	if cut <= 0 {
		return nil
	}
	spans := find(w.pending, pats)
	n := 0
	for _, s := range spans {
		if s.start >= cut {
			break
		}
		if s.end > cut {
			cut = s.start
			break
		}
		n++
	}
	if cut == 0 {
		return nil
	}
	out := w.pending[:cut]
	if n > 0 {
		out = replace(out, spans[:n])
	}
	if _, err := w.w.Write(out); err != nil {
		w.err = err
		return err
	}
	w.pending = append(w.pending[:0], w.pending[cut:]...)
	return nil
}
