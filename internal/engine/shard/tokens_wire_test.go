package shard_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/protocol"
)

// TestTokensCarryAnyBytes: a secret is any bytes, and JSON strings hold only
// UTF-8. A value that is not valid UTF-8 must reach the worker exactly as it
// is, or the server gets the wrong value and the worker redacts the wrong
// one.
func TestTokensCarryAnyBytes(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"PLAIN":   "an ordinary token value",
		"UNICODE": "schlüssel-キー-🔑",
		"LATIN1":  "caf\xe9-secret",
		"BROKEN":  "\xff\xfe\x00\x80tail",
		"EMPTY":   "",
	}
	exp := map[string]time.Time{"PLAIN": time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	var buf bytes.Buffer
	if err := protocol.NewEncoder(&buf).Write(&protocol.Tokens{Values: want, Expires: exp}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "\ufffd") || strings.Contains(buf.String(), `\ufffd`) {
		t.Errorf("the tokens line holds U+FFFD: a value was changed on the way: %s", buf.String())
	}
	m, err := protocol.NewDecoder(&buf).Read()
	if err != nil {
		t.Fatal(err)
	}
	got, ok := m.(*protocol.Tokens)
	if !ok {
		t.Fatalf("decoded %T, want *protocol.Tokens", m)
	}
	for k, v := range want {
		if got.Values[k] != v {
			t.Errorf("value %s = %q, want %q, byte for byte", k, got.Values[k], v)
		}
	}
	if len(got.Values) != len(want) || !got.Expires["PLAIN"].Equal(exp["PLAIN"]) {
		t.Errorf("decoded %d values, expires %v; want %d and %v", len(got.Values), got.Expires, len(want), exp)
	}
}
