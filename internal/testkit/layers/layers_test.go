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
	Name       string   // the package clause: main for a command
	Deps       []string // every package it depends on, transitively
	Imports    []string // the packages it imports directly
}

// load lists the module's packages with their dependencies, through the go
// command, as a build sees them (tests excluded).
func load(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Name,Deps,Imports", "../../../...")
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
// test servers, the benchmarks): they may reach across floors to drive
// real runs.
func testSupport(p string) bool {
	last := p[strings.LastIndex(p, "/")+1:]
	return strings.HasSuffix(last, "test") || strings.HasSuffix(last, "suite") || within(p, "internal/testkit") || within(p, "examples")
}

// The floors, top to bottom. A package may depend on its own floor and the
// floors below it, and each rule below narrows that further.
var (
	// vocabulary are the records every floor speaks: transcripts (with
	// the case and grade records), secrets, MCP server settings and the
	// protocol's messages. Public, because the contracts use them.
	vocabulary = []string{"transcript", "secrets", "servers", "protocol"}
	// contracts are what a plugin implements, with their suites.
	contracts = []string{"client", "runner", "store", "grade", "dataset", "credstore"}
)

// rule says what the packages it applies to may depend on: every MST
// package they depend on, transitively, must be within one of allowed (or
// the package itself).
type rule struct {
	name    string
	applies func(p string) bool
	allowed []string
}

func under(roots ...string) func(string) bool {
	return func(p string) bool {
		if testSupport(p) {
			return false
		}
		for _, r := range roots {
			if within(p, r) {
				return true
			}
		}
		return false
	}
}

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var rules = []rule{
	{"the ground helpers stand on nothing of MST's",
		under("internal/ground"), []string{"internal/ground"}},
	{"the vocabulary stands on the ground only",
		under(vocabulary...), join(vocabulary, []string{"internal/ground"})},
	{"a runner is transport: it knows secrets, not clients, servers, stores or the protocol",
		under("runner"), []string{"runner", "secrets", "internal/ground"}},
	{"the client contract knows servers and transcripts only",
		under("client"), []string{"client", "servers", "transcript", "secrets", "internal/ground"}},
	{"the result store keeps records: no grader, judge, provider, dataset reader or engine",
		under("store"), []string{"store", "transcript", "secrets", "internal/ground"}},
	{"the dataset contract reads cases into records",
		under("dataset"), []string{"dataset", "transcript", "internal/ground"}},
	{"a grader reads transcripts; judges reach models through the provider contract",
		under("grade"), []string{"grade", "transcript", "internal/provider", "internal/ground"}},
	{"the credential store keeps grants: no protocol, engine or result store",
		under("credstore"), []string{"credstore", "servers", "internal/ground"}},
	{"a plugin compiles the contracts, not the engine, the built-ins or the command line",
		under("plugin"), join(contracts, vocabulary, []string{"plugin", "internal/provider", "internal/ground"})},
	{"the provider contract stands on the ground",
		under("internal/provider"), []string{"internal/provider", "internal/ground"}},
	{"a detached run's records go through the result store's seam",
		under("internal/engine/detach"), join([]string{"internal/engine/detach", "store", "internal/ground"}, vocabulary)},
	{"the engine is built on the contracts, never on a built-in or the command line",
		under("internal/engine"), join([]string{"internal/engine", "internal/provider", "internal/ground"}, contracts, vocabulary)},
	{"the protocol's two sides import no runner and no hub",
		under("internal/engine/shard"), join([]string{"internal/engine/shard", "internal/engine/mcpproxy", "internal/provider", "internal/ground"}, []string{"client", "store", "grade", "dataset"}, vocabulary)},
	{"a built-in implements a contract: it imports no engine and no command line",
		func(p string) bool { return under("internal/builtin")(p) && p != "internal/builtin" },
		join([]string{"internal/builtin", "internal/provider", "internal/ground"}, contracts, vocabulary)},
	{"a built-in client imports no runner, store or engine",
		under("internal/builtin/client"), []string{"client", "internal/builtin/client", "internal/provider", "internal/builtin/provider", "servers", "transcript", "secrets", "internal/ground"}},
	{"a built-in runner is transport too",
		under("internal/builtin/runner"), []string{"runner", "internal/builtin/runner", "secrets", "internal/ground"}},
}

func TestFloors(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	for _, r := range rules {
		n := 0
		for name, p := range pkgs {
			if !r.applies(name) {
				continue
			}
			n++
			for _, d := range p.Deps {
				if !slices.ContainsFunc(r.allowed, func(a string) bool { return within(d, a) }) {
					t.Errorf("%s: %s depends on %s", r.name, name, d)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no package matched; the rule checks nothing", r.name)
		}
	}

	// Only the wiring package, internal/builtin, and the command line
	// (which opens stores by URL) name a built-in from outside.
	for name, p := range pkgs {
		if within(name, "internal/builtin") || testSupport(name) {
			continue
		}
		for _, imp := range p.Imports {
			if within(imp, "internal/builtin") && !cliMayImport(name, imp) {
				t.Errorf("%s imports %s; only internal/builtin names the built-ins", name, imp)
			}
		}
	}
	// The wiring package does name every built-in client and runner, so
	// the rule above is not empty.
	for name := range pkgs {
		kind := strings.Split(strings.TrimPrefix(name, "internal/builtin/"), "/")
		if !within(name, "internal/builtin") || name == "internal/builtin" || len(kind) != 2 || testSupport(name) {
			continue
		}
		if shared[name] {
			continue
		}
		if !slices.Contains(pkgs["internal/builtin"].Imports, name) {
			t.Errorf("internal/builtin does not import %s; is it still built in?", name)
		}
	}
}

// shared are built-in packages that other built-ins use, not registered
// on their own.
var shared = map[string]bool{
	"internal/builtin/client/cliproc":  true,
	"internal/builtin/client/desktop":  true,
	"internal/builtin/runner/clicmd":   true,
	"internal/builtin/provider/wire":   true,
	"internal/builtin/store/blobstore": true,
}

// cliMayImport reports whether the command line may import imp: the
// wiring, and the bucket code whose options (retry reports, bounds) it
// hands a bucket credential store, and whose grants' place it shows.
func cliMayImport(name, imp string) bool {
	return name == "internal/cli" && (imp == "internal/builtin" || within(imp, "internal/builtin/store") || within(imp, "internal/builtin/credstore"))
}
