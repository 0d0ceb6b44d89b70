package registry_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mst-eval/mst/internal/ground/registry"
)

type def struct {
	Name string
	Run  func()
}

func name(d *def) string { return d.Name }

func TestLookup(t *testing.T) {
	r := registry.New("runner", name, []*def{{Name: "processes"}, {Name: "docker"}, {Name: "local"}})
	if d, err := r.Lookup("docker"); err != nil || d.Name != "docker" {
		t.Errorf("Lookup(docker) = %v, %v", d, err)
	}
	_, err := r.Lookup("dokcer")
	if err == nil || err.Error() != `unknown runner "dokcer" (known: docker, local, processes)` {
		t.Errorf("Lookup(dokcer) = %v; want the known names, sorted", err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"docker", "local", "processes"}) {
		t.Errorf("Names = %q", got)
	}
	var all []string
	for _, d := range r.All() {
		all = append(all, d.Name)
	}
	if !slices.Equal(all, r.Names()) {
		t.Errorf("All is in the order %q, want Names' order", all)
	}
	if _, ok := r.Get("nope"); ok {
		t.Error("Get of an unknown name said ok")
	}
}

func TestNilAndEmpty(t *testing.T) {
	var r *registry.Registry[*def]
	if r.Names() != nil || len(r.All()) != 0 {
		t.Error("a nil registry lists something")
	}
	if _, ok := r.Get("x"); ok {
		t.Error("a nil registry has x")
	}
	if _, err := r.Lookup("x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("Lookup on a nil registry = %v; want an error naming x", err)
	}
	e := registry.New[*def]("dataset source", name, nil)
	if _, err := e.Lookup("acme/dataset/sql"); err == nil || err.Error() != `unknown dataset source "acme/dataset/sql": none is known` {
		t.Errorf("Lookup on an empty registry = %v", err)
	}
}

func TestAddRefuses(t *testing.T) {
	needsRun := registry.Check(func(d *def) error {
		if d.Run == nil {
			return errors.New("has no Run")
		}
		return nil
	})
	for _, c := range []struct {
		name string
		defs []*def
		want string
	}{
		{"twice", []*def{{Name: "a", Run: func() {}}, {Name: "a", Run: func() {}}}, `client "a" registered twice`},
		{"no name", []*def{{Run: func() {}}}, `a client without a name`},
		{"check", []*def{{Name: "b"}}, `client "b": has no Run`},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if v := recover(); fmt.Sprint(v) != c.want {
					t.Errorf("panic = %v; want %q", v, c.want)
				}
			}()
			registry.New("client", name, c.defs, needsRun)
		})
	}
}

func TestUnknown(t *testing.T) {
	r := registry.New("runner", name, []*def{{Name: "local"}}, registry.Unknown[*def](func(n string, known []string) error {
		return fmt.Errorf("no %s here; try %s", n, strings.Join(known, "|"))
	}))
	if _, err := r.Lookup("acme/env/x"); err == nil || err.Error() != "no acme/env/x here; try local" {
		t.Errorf("Lookup = %v; want the kind's own error", err)
	}
}

// A lazy registry is filled once, on its first read, whoever reads it
// first and however many read at once.
func TestLazy(t *testing.T) {
	var fills atomic.Int32
	r := registry.New[*def]("grader", name, nil, registry.Lazy(func() []*def {
		fills.Add(1)
		return []*def{{Name: "acme/grader/len"}}
	}))
	if fills.Load() != 0 {
		t.Fatal("a lazy registry was filled before it was read")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, ok := r.Get("acme/grader/len"); !ok {
				t.Error("Get after the fill missed the definition")
			}
		})
	}
	wg.Wait()
	if n := fills.Load(); n != 1 {
		t.Errorf("filled %d times, want once", n)
	}
}

// A name added while the registry was built is found without the fill;
// the fill runs for a name it lacks, and for a listing.
func TestLazyAfterEager(t *testing.T) {
	var fills atomic.Int32
	r := registry.New("grader", name, []*def{{Name: "toolCalled"}}, registry.Lazy(func() []*def {
		fills.Add(1)
		return []*def{{Name: "acme/grader/len"}}
	}))
	if _, ok := r.Get("toolCalled"); !ok || fills.Load() != 0 {
		t.Fatalf("Get of an eager name: ok %t, %d fills; want it found with no fill", ok, fills.Load())
	}
	if _, ok := r.Get("acme/grader/len"); !ok || fills.Load() != 1 {
		t.Fatalf("Get of a lazy name: ok %t, %d fills; want it found after one fill", ok, fills.Load())
	}
	if got := r.Names(); !slices.Equal(got, []string{"acme/grader/len", "toolCalled"}) {
		t.Errorf("Names = %q", got)
	}
	// The fill may not take an eager name.
	clash := registry.New("grader", name, []*def{{Name: "toolCalled"}}, registry.Lazy(func() []*def { return []*def{{Name: "toolCalled"}} }))
	defer func() {
		if v := recover(); fmt.Sprint(v) != `grader "toolCalled" registered twice` {
			t.Errorf("a fill that takes an eager name: panic %v", v)
		}
	}()
	clash.Names()
}
