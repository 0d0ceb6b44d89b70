package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/store"
)

// TestPreflightOnTheWorker: a worker checks what each client needs on its
// own machine (an installed CLI) before any trial, since the coordinator
// could check only its own: a missing program fails the readiness check,
// naming the variant and the fix, and no session opens.
func TestPreflightOnTheWorker(t *testing.T) {
	t.Parallel()
	opens, trials, err := runMissingCLI(t, "fake")
	if err == nil || !strings.Contains(err.Error(), "readiness check failed") || !strings.Contains(err.Error(), "npm install -g fake-cli") {
		t.Errorf("runPipes = %v; want the readiness check to fail with the client's preflight error", err)
	}
	if opens != 0 || trials != 0 {
		t.Errorf("%d sessions opened and %d trials ran on a machine without the client's program", opens, trials)
	}
}

// TestPreflightMachineSetup: on a machine whose runner says how clients
// get there (a container: MST_CLIENT_SETUP), a failed preflight gives that
// command too, with the client's name in it.
func TestPreflightMachineSetup(t *testing.T) {
	t.Setenv(shard.ClientSetupEnv, "build an image with `mst runner setup docker --with {client}`")
	opens, _, err := runMissingCLI(t, "fake-cli")
	if err == nil || !strings.Contains(err.Error(), "npm install -g fake-cli; build an image with `mst runner setup docker --with fake-cli`") || opens != 0 {
		t.Errorf("runPipes = %v (%d sessions opened); want the preflight error followed by the machine's setup command for fake-cli, and no session", err, opens)
	}
}

// TestPreflightSaysItsOwnSetup: a preflight error that already says how
// to get a machine that can run the client (client.ErrMachineSetup, as a
// desktop client's does) gets no runner advice on top.
func TestPreflightSaysItsOwnSetup(t *testing.T) {
	t.Setenv(shard.ClientSetupEnv, "build an image with `mst runner setup docker --with {client}`")
	opens, _, err := runFailingPreflight(t, "fake-app", fmt.Errorf("run it in the desktop image: %w", client.ErrMachineSetup))
	if err == nil || !strings.Contains(err.Error(), "run it in the desktop image") || strings.Contains(err.Error(), "--with fake-app") || opens != 0 {
		t.Errorf("runPipes = %v (%d sessions opened); want the preflight's own advice alone, and no session", err, opens)
	}
}

// runMissingCLI runs a one-setting shard of the client name, whose
// preflight always fails as for a CLI that is not installed. It returns
// how many sessions opened and trials ran, and the run's error.
func runMissingCLI(t *testing.T, name string) (opens int32, trials int, err error) {
	t.Helper()
	return runFailingPreflight(t, name, errors.New("the Fake CLI is not installed: run npm install -g fake-cli"))
}

// runFailingPreflight runs a one-setting shard of the client name, whose
// preflight fails with perr.
func runFailingPreflight(t *testing.T, name string, perr error) (opens int32, trials int, err error) {
	t.Helper()
	var opened atomic.Int32
	def := &client.Definition{
		Name: name, Options: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		Preflight: func(json.RawMessage) error { return perr },
		Open: func(ctx context.Context, p client.OpenParams) (client.Session, error) {
			opened.Add(1)
			return nil, errors.New("must not open")
		},
	}
	b := oneSetting([]string{"one"}, 1, time.Minute)
	b.Settings[0].Client = name
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &shard.Worker{Clients: client.NewRegistry(def), Results: store.OpenDir(t.TempDir(), nil), Logger: logger, MSTVersion: "test", WorkDir: t.TempDir()}
	ev := &trialEvents{}
	coord := &shard.Coordinator{MSTVersion: "test", Limits: shard.NewLimiter(nil, nil), Events: ev, Logger: logger}
	_, err = runPipes(t.Context(), w, b, coord, nil)
	return opened.Load(), len(ev.got()), err
}
