package cli_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
)

// closedPort is an address on loopback where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestResultsStoreUnreachable: mst run with a result store whose service
// refuses connections stops within blobstore.DefaultOpen (10 s), before
// anything runs, with exit code 2 and an error naming the URL, the
// address and where the address came from.
func TestResultsStoreUnreachable(t *testing.T) {
	addr := closedPort(t)
	cases := []struct {
		name, results, env, want string
	}{
		{"gs", "gs://mst-evals/team", addr, "connection refused by " + addr + " (STORAGE_EMULATOR_HOST=" + addr + ")"},
		{"s3", "s3://mst-evals/team?endpoint=http://" + addr + "&use_path_style=true&region=us-east-1&anonymous=true", "",
			"connection refused by " + addr + " (endpoint=http://" + addr + " in the URL)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("STORAGE_EMULATOR_HOST", c.env)
			}
			evalFile := quickstartCopy(t)
			t.Chdir(t.TempDir())
			start := time.Now()
			r := runCLI(t, "run", evalFile, "--results", c.results)
			took := time.Since(start)
			t.Logf("mst run --results %s: exit %d after %s\n%s", c.results, r.code, took.Round(time.Millisecond), r.stderr)
			if r.code != 2 {
				t.Errorf("mst run --results %s exited %d, want 2", c.results, r.code)
			}
			if took > blobstore.DefaultOpen+5*time.Second {
				t.Errorf("mst run --results %s took %s to fail, want about %s at most", c.results, took, blobstore.DefaultOpen)
			}
			// Each retry was said as it happened, before the error.
			for _, w := range []string{"mst-evals/team", "store not answering", c.want, "mst: store not answering (" + strings.SplitN(c.results, "?", 2)[0] + "): retry 1 in "} {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("mst run --results %s said:\n%s\nwant it to say %q", c.results, r.stderr, w)
				}
			}
		})
	}
}
