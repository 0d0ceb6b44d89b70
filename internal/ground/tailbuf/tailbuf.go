// Package tailbuf keeps the last bytes written to it: the end of a child
// program's stderr, to quote in an error when the program fails.
package tailbuf

import "sync"

// Buffer keeps the last Max bytes written to it. It is safe for concurrent
// use.
type Buffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// New returns a buffer that keeps the last max bytes.
func New(max int) *Buffer { return &Buffer{max: max} }

// Write keeps the end of what was written so far.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

// String returns what the buffer holds.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
