package shard_test

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
)

// TestHelloRefusesOtherPlugins: a worker whose plugins are not the ones
// its bundle lists, at the same versions, is refused at hello with a
// cancel, before it is sent any token.
func TestHelloRefusesOtherPlugins(t *testing.T) {
	t.Parallel()
	want := map[string]string{"acme": "1.2.0", "acmesql": "1.0.0"}
	for _, tc := range []struct {
		name   string
		worker map[string]string
		says   string
	}{
		{"missing", map[string]string{"acme": "1.2.0"}, "it has no plugin acmesql (the coordinator has 1.0.0)"},
		{"other version", map[string]string{"acme": "1.1.0", "acmesql": "1.0.0"}, "its plugin acme is 1.1.0, the coordinator's 1.2.0"},
		{"extra", map[string]string{"acme": "1.2.0", "acmesql": "1.0.0", "evil": "6.6.6"}, "it has plugin evil 6.6.6, which the coordinator does not"},
		{"none", nil, "it has no plugin acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fromWorker, toCoordinator := io.Pipe()
			fromCoordinator, toWorker := io.Pipe()
			c := &shard.Coordinator{MSTVersion: "test", Logger: discardLogger(), Bundles: []*shard.Bundle{{Plugins: want}}}
			errc := make(chan error, 1)
			go func() {
				_, err := c.Serve(t.Context(), 0, fromWorker, toWorker, nil)
				toWorker.Close()
				errc <- err
			}()
			h := helloFrom("test", 0)
			h.Plugins = tc.worker
			go func() {
				enc := protocol.NewEncoder(toCoordinator)
				enc.Write(h)
			}()
			// The coordinator's first and only line is the cancel.
			sc := bufio.NewScanner(fromCoordinator)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			err := <-errc
			toCoordinator.Close()
			if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "no trial ran") {
				t.Errorf("Serve(hello with plugins %v) = %v, want it to say %q", tc.worker, err, tc.says)
			}
			if len(lines) != 1 || !strings.Contains(lines[0], `"cancel"`) || strings.Contains(lines[0], "tokens") {
				t.Errorf("the coordinator wrote %q, want one cancel and no tokens", lines)
			}
		})
	}
	// The same plugins pass: the coordinator sends the tokens.
	fromWorker, toCoordinator := io.Pipe()
	fromCoordinator, toWorker := io.Pipe()
	c := &shard.Coordinator{MSTVersion: "test", Logger: discardLogger(), Bundles: []*shard.Bundle{{Plugins: want}}}
	go c.Serve(t.Context(), 0, fromWorker, toWorker, nil)
	h := helloFrom("test", 0)
	h.Plugins = map[string]string{"acmesql": "1.0.0", "acme": "1.2.0"}
	go protocol.NewEncoder(toCoordinator).Write(h)
	sc := bufio.NewScanner(fromCoordinator)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"tokens"`) {
		t.Errorf("after a hello with the bundle's plugins the coordinator wrote %q, want tokens", sc.Text())
	}
	toCoordinator.Close()
	fromCoordinator.Close()
}
