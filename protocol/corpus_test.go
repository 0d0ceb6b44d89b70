package protocol_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mst-eval/mst/protocol"
)

// TestDecodeCorpus pins what Decode makes of each named seed of FuzzDecode
// (testdata/fuzz/FuzzDecode), on top of the fuzz target's own check. A
// seed named after a message type decodes to that type; one named
// "accepted-…" decodes without an error (these pin lenient corners of
// encoding/json the protocol inherits); one named "malformed-…" is
// rejected, wrapping ErrUnknownMessage only when the line parses but its
// type is missing, empty or unknown. Files the fuzzer adds under other
// names are left to FuzzDecode.
func TestDecodeCorpus(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{
		protocol.TypeHello: "*protocol.Hello", protocol.TypeAcquire: "*protocol.Acquire", protocol.TypeNeedTokens: "*protocol.NeedTokens",
		protocol.TypeTrial: "*protocol.Trial", protocol.TypeHeartbeat: "*protocol.Heartbeat", protocol.TypeDone: "*protocol.Done",
		protocol.TypeGranted: "*protocol.Granted", protocol.TypeTokens: "*protocol.Tokens", protocol.TypeCancel: "*protocol.Cancel",
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		line := readSeed(t, filepath.Join(dir, name))
		m, err := protocol.Decode(line)
		switch want, isType := types[name]; {
		case isType:
			seen[name] = true
			if err != nil || typeName(m) != want {
				t.Errorf("Decode(seed %s) = %s, %v; want %s", name, typeName(m), err, want)
			}
		case strings.HasPrefix(name, "accepted-"):
			if err != nil {
				t.Errorf("Decode(seed %s) = %v, want a message", name, err)
			}
		case strings.HasPrefix(name, "malformed-"):
			if err == nil {
				t.Errorf("Decode(seed %s) = %s, want an error", name, typeName(m))
			}
			unknown := name == "malformed-unknown-type" || name == "malformed-empty-type" || name == "malformed-no-type" || name == "malformed-null"
			if errors.Is(err, protocol.ErrUnknownMessage) != unknown {
				t.Errorf("Decode(seed %s) = %v; wrapping ErrUnknownMessage: %t, want %t", name, err, !unknown, unknown)
			}
		}
	}
	for typ := range types {
		if !seen[typ] {
			t.Errorf("testdata/fuzz/FuzzDecode has no seed named %s, want one per message type", typ)
		}
	}
}

// readSeed reads a corpus file in the "go test fuzz v1" format holding one
// []byte value.
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header, value, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	quoted, ok := strings.CutPrefix(strings.TrimSpace(value), "[]byte(")
	quoted, ok2 := strings.CutSuffix(quoted, ")")
	if header != "go test fuzz v1" || !ok || !ok2 {
		t.Fatalf("%s is not a go test fuzz v1 file with one []byte", path)
	}
	s, err := strconv.Unquote(quoted)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

func typeName(m any) string {
	if m == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", m)
}
