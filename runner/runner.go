// Package runner creates the machines a run's shards run on and connects a
// worker on each to the coordinator over a channel.
//
// A run picks one runner by name (--runner). Its Definition says what OS its
// machines run, which options it takes (--runner-option key=value, checked
// against its schema) and how many shards it can run at once. New makes the
// Runner for one run; RunShard is then called once per shard, concurrently,
// and Close once at the end.
//
// Most runners only know how to create a machine: MachineRunner turns such
// a function into a whole runner (copy the bundle, start `mst collect`,
// connect the protocol, copy transcripts back, remove the machine per
// keep). A runner that cannot use it implements RunShard itself, as Local
// does: it runs the worker inside the mst process, over two pipes.
//
// A shard either collects (runs trials) or grades (runs judges over stored
// transcripts, `mst grade-shard`): Shard.Work says which.
package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/ground/registry"
	"github.com/mst-eval/mst/secrets"
)

// Keep policies: which machines survive their shard.
const (
	KeepNever  = "never"
	KeepFailed = "failed"
	KeepAlways = "always"
)

// Definition describes a runner.
type Definition struct {
	// Name is what --runner takes.
	Name        string
	Description string
	// OS is the GOOS of the machines the runner creates, or "" when it
	// varies or is unknown (then clients' OS requirements are not checked).
	OS string
	// Options is the JSON Schema of the runner's own --runner-option keys
	// (an object with additionalProperties false); shards and keep belong
	// to MST and are not in it.
	Options json.RawMessage
	// MaxShards is the most shards the runner runs at once.
	MaxShards int
	// ThisMachine is true when the runner's machines are this machine (its
	// files and programs), so clients' preflight checks can run at load.
	ThisMachine bool
	// New makes the runner for one run.
	New func(ctx context.Context, p Params) (Runner, error)
	// Setup prepares what the runner needs once per machine of the user's
	// (`mst runner setup NAME`), such as building a worker image; nil when
	// it needs nothing.
	Setup func(ctx context.Context, p SetupParams) error
	// Leftovers lists the machines a run left behind (kept by keep, or
	// orphaned by a crash), by run id ("" for every run); Remove deletes
	// them (`mst runner cleanup`). Both nil when the runner leaves nothing.
	Leftovers func(ctx context.Context, options map[string]string, runID string) ([]Leftover, error)
	Remove    func(ctx context.Context, options map[string]string, l Leftover) error
	// MachineCommands are the helper commands the runner runs inside its
	// machines, as `mst runner NAME ARGS…` (docker: idle, stop-exec).
	// mst offers every runner's as hidden subcommands of `mst runner`; two
	// runners that need the same command declare the same one.
	MachineCommands []MachineCommand
	// Coordinator creates the machine a detached run's coordinator runs
	// on (mst run --detach, coordinator.go); nil when the runner cannot,
	// and --detach is then refused before any machine is made.
	Coordinator CreateCoordinator
}

// SetupParams is what `mst runner setup` passes a runner.
type SetupParams struct {
	Options map[string]string
	// MST is the path of this mst binary, to put in a worker image.
	MST string
	// MSTVersion is this mst's version (what a worker image is tagged
	// with).
	MSTVersion string
	// With names parts of a worker image with a userland (setup's --with,
	// each value a comma-separated list); a runner that builds no such
	// image refuses it.
	With   []string
	Logger *slog.Logger
	// Out receives progress meant for the user.
	Out io.Writer
}

// Leftover is a machine a run left behind.
type Leftover struct {
	ID    string `json:"id"`
	Run   string `json:"run"`
	Shard int    `json:"shard"`
	// Detail is what the runner can say about it (its state, its age).
	Detail string `json:"detail,omitempty"`
}

// DefaultStopGrace is how long a worker gets to end after its stdin closes
// before it is stopped, when Params.StopGrace is zero.
const DefaultStopGrace = 10 * time.Second

// Params is what a runner is made with.
type Params struct {
	// Options are the runner's --runner-option values, checked against
	// Definition.Options.
	Options map[string]string
	Shards  int
	Keep    string
	Logger  *slog.Logger
	// MST is the command that runs this mst binary on this machine, for
	// runners that start workers here.
	MST []string
	// MSTVersion is this mst's version: the one source runners learn it
	// from (image tags, labels, the check of the mst on a machine).
	MSTVersion string
	// InProcess is the worker the local runner runs inside this process;
	// nil for the other runners.
	InProcess InProcess
	// Secrets are the run's secret values, for runners that need to hide
	// them from what they print.
	Secrets *secrets.Set
	// StopGrace is how long a worker gets to end after its stdin closes
	// before it is stopped, and then again between SIGTERM and SIGKILL;
	// zero means DefaultStopGrace. Tests set it small.
	StopGrace time.Duration
	// Deadline is how long each machine may live: a runner that creates
	// machines makes them end by themselves after it (a container's main
	// process, a pod's activeDeadlineSeconds, a VM's maximum run time), so
	// a coordinator that dies leaves nothing behind for long. Zero means
	// DefaultMachineDeadline.
	Deadline time.Duration
	// HostExclusive is true when a client of the run needs the host its
	// machines run on to itself (client.Definition.HostExclusive: Cowork,
	// whose VM service listens on a host-wide port). A runner whose
	// machines share a host runs them one at a time.
	HostExclusive bool
	// Heartbeat, when not zero, is how often the workers MachineRunner
	// starts send heartbeats (`mst collect --heartbeat D`); zero leaves the
	// worker's default. Tests set it small.
	Heartbeat time.Duration
}

// DefaultMachineDeadline is how long a machine lives at most when the run
// gives no deadline of its own (mst run --deadline).
const DefaultMachineDeadline = 72 * time.Hour

// MachineDeadline is p.Deadline, or DefaultMachineDeadline when it is zero.
func (p Params) MachineDeadline() time.Duration {
	if p.Deadline > 0 {
		return p.Deadline
	}
	return DefaultMachineDeadline
}

// Grace is p.StopGrace, or DefaultStopGrace when it is zero.
func (p Params) Grace() time.Duration {
	if p.StopGrace > 0 {
		return p.StopGrace
	}
	return DefaultStopGrace
}

// InProcess runs a worker inside this process (the local runner): it reads
// the bundle from bundleDir, reads coordinator messages from in and writes
// protocol lines to out, and returns when the worker is done. The
// coordinator's side supplies it.
type InProcess func(ctx context.Context, bundleDir string, in io.Reader, out io.Writer) error

// Fetch returns the bytes of one file the worker wrote, by its
// slash-separated path relative to the worker's results folder. It uses
// ctx as given: the coordinator bounds it and detaches it from a cancel,
// and a runner adds no timeout of its own. A runner whose worker writes
// into the coordinator's store itself (local) passes nil.
type Fetch func(ctx context.Context, path string) ([]byte, error)

// Shard is one shard to run, as the coordinator hands it to a runner.
type Shard struct {
	// Index is the shard's number, from 0.
	Index int
	// Run is the run's id, which machine runners name and label their
	// machines with.
	Run string
	// Attempt counts the run's attempts from 1 (a resumed run is attempt
	// 2 and up), so the machines of a kept earlier attempt keep their
	// names.
	Attempt int
	// Work is what the shard does: "" or "collect" runs trials (the
	// worker is `mst collect`), "grade" grades stored transcripts (`mst
	// grade-shard`). The bundle says the same.
	Work string
	// BundleDir is a local folder holding the worker's bundle (files the
	// runner does not read). A machine runner copies it to WORK/bundle on
	// the machine.
	BundleDir string
	// HostPaths are the paths on this machine the shard's servers use, for
	// runners whose machines can mount them (docker).
	HostPaths HostPaths
	// Serve is the coordinator's side of the channel: it reads the
	// worker's stdout from in, writes to the worker's stdin through out,
	// and brings files back with fetch. It returns when the worker said
	// done, or was lost.
	Serve func(ctx context.Context, in io.Reader, out io.Writer, fetch Fetch) error
}

// HostPaths are the absolute paths on the coordinator's machine that a
// shard's stdio servers use.
type HostPaths struct {
	// Commands are the server commands given by absolute path.
	Commands []string
	// Dirs are the servers' working folders given by absolute path.
	Dirs []string
	// Args are the absolute paths in the servers' arguments: an argument
	// that is one (/data/db.sqlite), or the value of one that sets one
	// (--root=/data). They are often files or folders a server reads.
	Args []string
	// ConfigDir is the folder of the eval config file, or "".
	ConfigDir string
}

// ShardReport says where a shard ran.
type ShardReport struct {
	Machine string
	Image   string
	// Kept says the machine was kept after its shard (keep=failed or
	// always): mst runner cleanup removes it.
	Kept bool
}

// Runner runs the shards of one run.
type Runner interface {
	// RunShard starts a worker for s and connects it to s.Serve. It returns
	// when the worker has ended; the error says why the shard did not end
	// cleanly (Serve's error, or why no worker could be started).
	RunShard(ctx context.Context, s Shard) (ShardReport, error)
	// Close releases what the runner holds. It is safe after a failed New.
	Close() error
}

// Registry holds runner definitions by name (MST's one registry shape).
type Registry = registry.Registry[*Definition]

// NewRegistry returns a registry of defs; a duplicate name panics.
func NewRegistry(defs ...*Definition) *Registry {
	return registry.New("runner", func(d *Definition) string { return d.Name }, defs, registry.Unknown[*Definition](unknownRunner))
}

// unknownRunner says what a runner name that is not known is, and how to
// get it when a plugin would give it.
func unknownRunner(name string, known []string) error {
	if parts := strings.Split(name, "/"); len(parts) == 3 {
		if parts[1] == "env" {
			return fmt.Errorf("unknown runner %q: plugin environments are runners now; use %s/runner/%s", name, parts[0], parts[2])
		}
		return fmt.Errorf("unknown runner %q: no plugin of this mst provides it (mst plugins lists them; a Go plugin is compiled in with mst build --with MODULE; known: %s)", name, strings.Join(known, ", "))
	}
	return fmt.Errorf("unknown runner %q (known: %s)", name, strings.Join(known, ", "))
}
