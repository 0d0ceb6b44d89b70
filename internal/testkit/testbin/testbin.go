// Package testbin builds the module's programs for tests that run them as
// real processes (mst as a worker, the MCP test server): one go build per
// test binary and set of options, shared by every test that asks, into a
// folder of its own. A build that fails is an error for every caller: an
// in-repo program that does not build is never a reason to skip.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// The programs tests build, by import path.
const (
	MST        = "github.com/mst-eval/mst/cmd/mst"
	TestServer = "github.com/mst-eval/mst/internal/testkit/testserver/cmd/mcp-testserver"
	Weather    = "github.com/mst-eval/mst/examples/quickstart/weather"
)

// Options say how to build.
type Options struct {
	// Version, when set, is stamped as mst's version (cli.Version), so a
	// test's workers and its coordinator agree at hello.
	Version string
	// Static builds for Linux without cgo, for containers.
	Static bool
}

type result struct {
	once sync.Once
	dir  string
	err  error
}

var (
	mu     sync.Mutex
	builds = map[string]*result{}
)

// Build builds pkgs with o once per process and returns the folder holding
// the programs, each named for the last element of its import path.
func Build(o Options, pkgs ...string) (string, error) {
	key := fmt.Sprintf("%+v %s", o, strings.Join(pkgs, " "))
	mu.Lock()
	r := builds[key]
	if r == nil {
		r = &result{}
		builds[key] = r
	}
	mu.Unlock()
	r.once.Do(func() {
		if r.dir, r.err = os.MkdirTemp("", "mst-testbin-"); r.err != nil {
			return
		}
		args := []string{"build", "-o", r.dir + string(filepath.Separator)}
		if o.Version != "" {
			args = append(args, "-ldflags=-X github.com/mst-eval/mst/internal/cli.Version="+o.Version)
		}
		cmd := exec.Command("go", append(args, pkgs...)...)
		if o.Static {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			r.err = fmt.Errorf("building %s: %v\n%s", strings.Join(pkgs, ", "), err, out)
		}
	})
	return r.dir, r.err
}

// Path returns where Build put the program of import path pkg in dir.
func Path(dir, pkg string) string { return filepath.Join(dir, path.Base(pkg)) }

// Clean removes every folder Build made; a TestMain calls it after the
// tests have run.
func Clean() {
	mu.Lock()
	defer mu.Unlock()
	for _, r := range builds {
		if r.dir != "" {
			os.RemoveAll(r.dir)
		}
	}
}

// Program returns the path of a program the tests need that is not built
// from this module (xmllint, chromium), and fails t when it is missing: a
// missing part is never a reason to skip. install says how to get it.
func Program(t interface {
	Helper()
	Fatalf(string, ...any)
}, install string, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("%s is not installed: %s (scripts/test installs it when run as root)", strings.Join(names, " or "), install)
	return ""
}
