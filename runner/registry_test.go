package runner_test

import (
	"testing"

	"github.com/mst-eval/mst/runner"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := runner.NewRegistry(runner.LocalDefinition(), runner.ProcessesDefinition())
	_, err := reg.Lookup("proceses")
	if want := `unknown runner "proceses" (known: local, processes)`; err == nil || err.Error() != want {
		t.Errorf("Lookup(proceses) = %v, want %q", err, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewRegistry with a name twice did not panic")
		}
	}()
	runner.NewRegistry(runner.LocalDefinition(), runner.LocalDefinition())
}
