package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// DefaultMaxTokens caps a response when the request leaves MaxTokens at 0.
const DefaultMaxTokens = 4096

// DefaultMaxRetries is how many times a 429 or 5xx is retried when
// provider.Options.MaxRetries is negative.
const DefaultMaxRetries = 2

// MaxTokens returns n, or DefaultMaxTokens when n is not positive.
func MaxTokens(n int) int64 {
	if n <= 0 {
		return DefaultMaxTokens
	}
	return int64(n)
}

// MaxRetries returns n, or DefaultMaxRetries when n is negative.
func MaxRetries(n int) int {
	if n < 0 {
		return DefaultMaxRetries
	}
	return n
}

// emptySchema is offered for a tool that declares no input schema.
const emptySchema = `{"type":"object","properties":{}}`

// Schema returns the input schema of a tool as a JSON object. An empty schema
// becomes an object schema without properties; anything that is not a JSON
// object is an error naming the tool.
func Schema(tool string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(emptySchema), nil
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("tool %q: input schema is not a JSON object", tool)
	}
	return raw, nil
}

// SchemaMap is Schema decoded into a map, for SDKs that take the schema as
// map[string]any.
func SchemaMap(tool string, raw json.RawMessage) (map[string]any, error) {
	s, err := Schema(tool, raw)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(s, &m); err != nil {
		return nil, fmt.Errorf("tool %q: decoding input schema: %w", tool, err)
	}
	return m, nil
}

// Arguments returns the arguments of a tool call as a JSON object, for wire
// formats that carry them as one. Anything that is not a JSON object (empty,
// null, malformed, or the JSON string ArgumentsFromText made of malformed
// text) becomes {}.
func Arguments(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return json.RawMessage(`{}`)
	}
	return t
}

// ArgumentsFromText turns the argument text of a wire format that carries
// arguments as a string into provider.ToolCall.Arguments: valid JSON stays as
// it is, empty text becomes {}, and anything else becomes a JSON string
// holding the text, so that the call can still be recorded and answered.
func ArgumentsFromText(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if t == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	q, _ := json.Marshal(s) // a string always marshals
	return q
}

// ArgumentsText is the inverse of ArgumentsFromText: the text to send back
// for a call's arguments. A JSON string gives back the text it holds.
func ArgumentsText(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "{}"
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) == nil {
			return s
		}
	}
	return string(t)
}

// Backoff returns how long to wait before retry n (counted from 0): half a
// second doubled per retry, at most eight seconds, less up to a quarter of
// jitter. It is the schedule the SDKs use for their own HTTP retries.
func Backoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n, 4)
	d = min(d, 8*time.Second)
	return d - rand.N(d/4)
}

// Retry calls attempt until it returns nil, returns an error for which
// retryable is false, or has been retried maxRetries times; it returns the
// last error. Before retry n it waits backoff(n); it stops early when ctx is done,
// with an error that wraps both ctx.Err() and the last attempt's error.
func Retry(ctx context.Context, maxRetries int, backoff func(n int) time.Duration, retryable func(error) bool, attempt func(context.Context) error) error {
	for n := 0; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if errors.Is(err, ctxErr) {
				return err
			}
			return fmt.Errorf("%w: %w", ctxErr, err)
		}
		if n >= maxRetries || !retryable(err) {
			return err
		}
		t := time.NewTimer(backoff(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Retryable reports whether an HTTP status is worth retrying: a timeout (408),
// a conflict (409), a rate limit (429) or a server error (5xx).
func Retryable(status int) bool {
	return status == 408 || status == 409 || status == 429 || status >= 500
}

// CutOff reports whether err is a response body that ended early: the
// connection was closed or reset while the answer was being read (an
// unexpected EOF). Such a failure happened after the request was accepted,
// and nothing of the answer was used, so it is worth another attempt. A
// failure of the request itself (refused, or reset before any answer)
// comes wrapped in a *url.Error: the SDK has retried it already, and
// retrying its whole call again would make (1+retries)² attempts.
func CutOff(err error) bool {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return false
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
