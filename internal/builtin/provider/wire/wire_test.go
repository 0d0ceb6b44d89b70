package wire

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, tokens, retries int }{
		{in: -1, tokens: DefaultMaxTokens, retries: DefaultMaxRetries},
		{in: 0, tokens: DefaultMaxTokens, retries: 0},
		{in: 5, tokens: 5, retries: 5},
	} {
		if got := MaxTokens(tc.in); got != int64(tc.tokens) {
			t.Errorf("MaxTokens(%d) = %d, want %d", tc.in, got, tc.tokens)
		}
		if got := MaxRetries(tc.in); got != tc.retries {
			t.Errorf("MaxRetries(%d) = %d, want %d", tc.in, got, tc.retries)
		}
	}
}

func TestSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "", want: `{"type":"object","properties":{}}`},
		{in: "null", want: `{"type":"object","properties":{}}`},
		{in: ` {"type":"object","required":["a"]} `, want: `{"type":"object","required":["a"]}`},
		{in: `[1]`, wantErr: true},
		{in: `{"type":`, wantErr: true},
		{in: `"object"`, wantErr: true},
	} {
		got, err := Schema("t", json.RawMessage(tc.in))
		if (err != nil) != tc.wantErr {
			t.Errorf("Schema(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Schema(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestSchemaMap(t *testing.T) {
	t.Parallel()
	got, err := SchemaMap("echo", json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "object", "properties": map[string]any{"s": map[string]any{"type": "string"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SchemaMap mismatch (-want +got):\n%s", diff)
	}
	if _, err := SchemaMap("echo", json.RawMessage(`true`)); err == nil {
		t.Error(`SchemaMap("echo", true) = nil error, want an error`)
	}
}

func TestArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{in: "", want: "{}"},
		{in: "null", want: "{}"},
		{in: ` {"a":1} `, want: `{"a":1}`},
		{in: `"{broken"`, want: "{}"},
		{in: `{broken`, want: "{}"},
		{in: `[1,2]`, want: "{}"},
	} {
		if got := Arguments(json.RawMessage(tc.in)); string(got) != tc.want {
			t.Errorf("Arguments(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestArgumentsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string // as the model sent it
		raw  string // as provider.ToolCall.Arguments holds it
		back string // as sent back to the model
	}{
		{text: `{"a":1}`, raw: `{"a":1}`, back: `{"a":1}`},
		{text: ``, raw: `{}`, back: `{}`},
		{text: `  `, raw: `{}`, back: `{}`},
		{text: `{"a":`, raw: `"{\"a\":"`, back: `{"a":`},
		{text: `[1]`, raw: `[1]`, back: `[1]`},
	} {
		raw := ArgumentsFromText(tc.text)
		if string(raw) != tc.raw {
			t.Errorf("ArgumentsFromText(%q) = %s, want %s", tc.text, raw, tc.raw)
		}
		if back := ArgumentsText(raw); back != tc.back {
			t.Errorf("ArgumentsText(%s) = %q, want %q", raw, back, tc.back)
		}
	}
	if got := ArgumentsText(nil); got != "{}" {
		t.Errorf("ArgumentsText(nil) = %q, want {}", got)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for n, hi := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second} {
		got := Backoff(n)
		if got > hi || got < hi*3/4 {
			t.Errorf("Backoff(%d) = %v, want within [%v, %v]", n, got, hi*3/4, hi)
		}
	}
}

var (
	errRetry = errors.New("retry me")
	errFinal = errors.New("final")
)

func TestRetry(t *testing.T) {
	t.Parallel()
	noWait := func(int) time.Duration { return 0 }
	retryable := func(err error) bool { return errors.Is(err, errRetry) }
	for _, tc := range []struct {
		name       string
		maxRetries int
		results    []error // what each attempt returns; nil after the end
		wantErr    error
		wantCalls  int
	}{
		{name: "first try", maxRetries: 2, wantCalls: 1},
		{name: "retried then success", maxRetries: 2, results: []error{errRetry, errRetry}, wantCalls: 3},
		{name: "budget spent", maxRetries: 2, results: []error{errRetry, errRetry, errRetry, errRetry}, wantErr: errRetry, wantCalls: 3},
		{name: "no retries", maxRetries: 0, results: []error{errRetry}, wantErr: errRetry, wantCalls: 1},
		{name: "not retryable", maxRetries: 2, results: []error{errFinal}, wantErr: errFinal, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := Retry(t.Context(), tc.maxRetries, noWait, retryable, func(context.Context) error {
				calls++
				if calls <= len(tc.results) {
					return tc.results[calls-1]
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("Retry() = %v, want %v", err, tc.wantErr)
			}
			if calls != tc.wantCalls {
				t.Errorf("Retry() made %d attempts, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestRetryStopsWhenContextIsDone(t *testing.T) {
	t.Parallel()
	retryable := func(error) bool { return true }

	t.Run("during the wait", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		// The wait would outlast the test; cancelling must end it.
		forever := func(int) time.Duration { cancel(); return time.Hour }
		calls := 0
		err := Retry(ctx, 5, forever, retryable, func(context.Context) error { calls++; return errRetry })
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errRetry) {
			t.Errorf("Retry() = %v, want an error wrapping context.Canceled and %v", err, errRetry)
		}
		if calls != 1 {
			t.Errorf("Retry() made %d attempts, want 1", calls)
		}
	})

	t.Run("during an attempt", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := Retry(ctx, 5, func(int) time.Duration { return 0 }, retryable, func(context.Context) error {
			calls++
			cancel()
			return errRetry
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errRetry) {
			t.Errorf("Retry() = %v, want an error wrapping context.Canceled and %v", err, errRetry)
		}
		if calls != 1 {
			t.Errorf("Retry() made %d attempts, want 1", calls)
		}
	})
}
