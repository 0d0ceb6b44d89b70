package cli_test

import (
	"path/filepath"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// waitFiles waits until the glob (args[1]) matches at least N (args[0])
// files, for up to 60 seconds: `waitfiles 2 results/*/transcripts/*/*.json`.
func waitFiles(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waitfiles N GLOB")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("waitfiles: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		matches, _ := filepath.Glob(ts.MkAbs(args[1]))
		if len(matches) >= n {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfiles: %d files match %s after 60s, want %d", len(matches), args[1], n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
