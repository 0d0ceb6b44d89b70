package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/transcript"
)

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	msgs := []any{
		&Hello{Protocol: Protocol, MSTVersion: "1.2.3", Shard: 2, OS: "linux", Arch: "amd64", ClientVersions: map[string]string{"api": "go1.26"}},
		&Acquire{ID: 7, Key: transcript.Key{Case: "c", Variant: "v", Trial: 1}, Providers: []string{"anthropic"}, Servers: []string{"weather"}},
		&Granted{ID: 7},
		&Trial{Acquire: 7, Key: transcript.Key{Case: "c", Variant: "v", Trial: 1}, Status: "errored", Cause: "server", Path: "transcripts/v/c.t1.json", DurationMs: 12.5},
		&Heartbeat{InFlight: 1, Done: 3},
		&NeedTokens{Servers: []string{"drive"}},
		&Tokens{Values: map[string]string{"K": "v"}},
		&Cancel{Reason: "stop"},
		&Done{Counts: transcript.Counts{Planned: 4, Answered: 3, Errored: 1}, CleanupOK: true},
	}
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for _, m := range msgs {
		if err := enc.Write(m); err != nil {
			t.Fatalf("Write(%T) = %v", m, err)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != len(msgs) {
		t.Fatalf("wrote %d lines, want %d", n, len(msgs))
	}
	dec := NewDecoder(&buf)
	for _, want := range msgs {
		got, err := dec.Read()
		if err != nil {
			t.Fatalf("Read() = %v, want %T", err, want)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("round trip of %T (-want +got):\n%s", want, diff)
		}
	}
	if _, err := dec.Read(); !errors.Is(err, io.EOF) {
		t.Errorf("Read() at the end = %v, want io.EOF", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line    string
		unknown bool
	}{
		{`{"type":"teleport","x":1}`, true},
		{`not json`, false},
		{`{"type":"granted","id":"seven"}`, false},
		{`{"type":"hello","protocol":"mst.shard/v1"`, false}, // truncated
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.line))
		if err == nil {
			t.Errorf("Decode(%s) = nil error, want one", tt.line)
			continue
		}
		if errors.Is(err, ErrUnknownMessage) != tt.unknown {
			t.Errorf("Decode(%s) = %v; unknown-type error = %v, want %v", tt.line, err, !tt.unknown, tt.unknown)
		}
	}
	// Unknown fields are ignored.
	m, err := Decode([]byte(`{"type":"granted","id":3,"future":true}`))
	if err != nil || m.(*Granted).ID != 3 {
		t.Errorf("Decode with an unknown field = %v, %v", m, err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"type":"hello","protocol":"mst.shard/v1","mstVersion":"1"}`))
	f.Add([]byte(`{"type":"trial","key":{"case":"a","variant":"b","trial":1},"status":"answered"}`))
	f.Add([]byte(`{"type":`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := Decode(line)
		if err == nil && messageType(m) == "" {
			t.Fatalf("Decode(%q) returned %T, not a protocol message", line, m)
		}
	})
}
