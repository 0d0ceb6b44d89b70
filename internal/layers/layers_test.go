package layers

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mst-eval/mst/"

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Deps       []string // every package it depends on, transitively
	Imports    []string // the packages it imports directly
}

// load lists the module's packages with their dependencies, through the go
// command, as a build sees them (tests excluded).
func load(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps,Imports", "../../...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("reading go list: %v", err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		p.Deps = own(p.Deps)
		p.Imports = own(p.Imports)
		pkgs[name] = p
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; want the whole module", len(pkgs))
	}
	return pkgs
}

// own keeps the module's own packages, without the module prefix.
func own(paths []string) []string {
	var out []string
	for _, p := range paths {
		if strings.HasPrefix(p, module) {
			out = append(out, strings.TrimPrefix(p, module))
		}
	}
	return out
}

// within reports whether p is root or below it.
func within(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// testSupport are packages that exist for tests (conformance suites, fakes,
// test servers): they may reach across floors to drive real runs.
func testSupport(p string) bool {
	last := p[strings.LastIndex(p, "/")+1:]
	return strings.HasSuffix(last, "test") || within(p, "internal/testserver")
}

// concrete are the built-in clients and runners, which only the wiring
// file names.
var concrete = []string{
	"client/api", "client/claudecode", "client/codexcli", "client/geminicli",
	"client/cowork", "client/chatgpt", "client/codexapp",
	"runner/docker", "runner/ssh", "runner/kubernetes",
}

func TestFloors(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	type rule struct {
		name      string
		applies   func(p string) bool
		forbidden []string // package roots the package must not depend on
	}
	rules := []rule{
		{
			name: "records and configs import no runner, shard or client",
			applies: func(p string) bool {
				for _, r := range []string{"transcript", "eval", "dataset", "grade", "report", "store"} {
					if within(p, r) && !testSupport(p) {
						return true
					}
				}
				return false
			},
			forbidden: []string{"runner", "shard", "client", "run", "servers"},
		},
		{
			name:      "runners are transport: no shard, client, store, eval, dataset, grade or servers",
			applies:   func(p string) bool { return within(p, "runner") && !testSupport(p) },
			forbidden: []string{"shard", "client", "store", "eval", "dataset", "grade", "servers", "run"},
		},
		{
			name:      "the protocol imports no runner and no hub",
			applies:   func(p string) bool { return within(p, "shard") && !testSupport(p) },
			forbidden: []string{"runner", "run", "internal/cli"},
		},
		{
			name:      "clients import no runner, shard, store or hub",
			applies:   func(p string) bool { return within(p, "client") && !testSupport(p) },
			forbidden: []string{"runner", "shard", "store", "run", "internal/cli"},
		},
	}
	for _, r := range rules {
		n := 0
		for name, p := range pkgs {
			if !r.applies(name) {
				continue
			}
			n++
			for _, d := range p.Deps {
				for _, f := range r.forbidden {
					if within(d, f) {
						t.Errorf("%s: %s depends on %s", r.name, name, d)
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no package matched; the rule checks nothing", r.name)
		}
	}

	// Only the wiring file imports the concrete clients and runners.
	for name, p := range pkgs {
		if name == "internal/builtin" || testSupport(name) {
			continue
		}
		for _, imp := range p.Imports {
			for _, c := range concrete {
				if imp == c && !within(name, c) {
					t.Errorf("%s imports %s; only internal/builtin names the built-in clients and runners", name, imp)
				}
			}
		}
	}
	// The wiring file does name them all, so the rule above is not empty.
	for _, c := range concrete {
		if !slices.Contains(pkgs["internal/builtin"].Imports, c) {
			t.Errorf("internal/builtin does not import %s; is it still built in?", c)
		}
	}
}
