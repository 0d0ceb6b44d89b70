package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrUnknownMessage is returned by Decoder.Read for a line whose type this
// version does not know.
var ErrUnknownMessage = errors.New("unknown message type")

// ErrBadLine is returned by Decoder.Read for a line that is not a protocol
// message at all (not JSON, a message whose fields do not decode, or a line
// longer than the protocol allows).
var ErrBadLine = errors.New("not a protocol line")

// maxLine bounds one protocol line.
const maxLine = 16 << 20

// Encoder writes messages, one JSON object per line. Write may be called
// from any goroutine.
type Encoder struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEncoder returns an encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Write sends one message (a pointer to one of the message types).
func (e *Encoder) Write(m any) error {
	typ := messageType(m)
	if typ == "" {
		return fmt.Errorf("shard: %T is not a protocol message", m)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("shard: encoding %s: %w", typ, err)
	}
	var line bytes.Buffer
	line.Grow(len(body) + len(typ) + 16)
	line.WriteString(`{"type":"`)
	line.WriteString(typ)
	line.WriteByte('"')
	if len(body) > 2 {
		line.WriteByte(',')
		line.Write(body[1 : len(body)-1])
	}
	line.WriteString("}\n")
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err = e.w.Write(line.Bytes())
	return err
}

// Decoder reads messages, one JSON object per line. Unknown fields are
// ignored; unknown types are an error wrapping ErrUnknownMessage.
type Decoder struct {
	s *bufio.Scanner
}

// NewDecoder returns a decoder reading r.
func NewDecoder(r io.Reader) *Decoder {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), maxLine)
	return &Decoder{s: s}
}

// Read returns the next message, or io.EOF at the end of the stream.
func (d *Decoder) Read() (any, error) {
	for d.s.Scan() {
		line := bytes.TrimSpace(d.s.Bytes())
		if len(line) == 0 {
			continue
		}
		return Decode(line)
	}
	if err := d.s.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			// What was read is no message, and the channel is fine: the
			// sender broke the framing.
			return nil, fmt.Errorf("shard: %w: a line longer than %d bytes", ErrBadLine, maxLine)
		}
		return nil, fmt.Errorf("shard: reading: %w", err)
	}
	return nil, io.EOF
}

// Decode parses one protocol line.
func Decode(line []byte) (any, error) {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("shard: %w: %q: %w", ErrBadLine, abbreviate(line), err)
	}
	m := newMessage(env.Type)
	if m == nil {
		return nil, fmt.Errorf("shard: %w %q", ErrUnknownMessage, env.Type)
	}
	if err := json.Unmarshal(line, m); err != nil {
		return nil, fmt.Errorf("shard: %w: bad %s message: %w", ErrBadLine, env.Type, err)
	}
	return m, nil
}

func abbreviate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}
