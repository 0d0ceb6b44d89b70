// Package runnertest is the conformance suite every runner passes, and
// every Machine a runner creates, the way testing/fstest checks an fs.FS.
//
// Run checks a runner.Runner end to end: it hands the runner real shards
// (the api client on the offline model, with internal/testkit/testserver as the
// MCP server), serves them with a real shard.Coordinator, and checks what
// comes back:
//
//   - every trial of every bundle ends as one transcript in the
//     coordinator's run folder, reported once, with the shard it ran on;
//   - each worker's hello carries mst.shard/v1 and the coordinator's MST
//     version;
//   - a cancel of RunShard's context ends the trials in flight as
//     cancelled, keeps the finished ones, and the worker still says done;
//   - a worker whose readiness check fails makes RunShard return an error
//     and leaves no transcript;
//   - Close succeeds on a runner that ran nothing and on one that ran
//     shards.
//
// RunMachine checks a runner.Machine and so its Channel: Exec carries
// stdin, stdout, stderr and the exit code, returns when its command exits
// even while stdin stays open, and stops the command when its context
// ends; CopyTo and CopyFrom round-trip a folder and a file; Remove may be
// called twice.
//
// The suite starts the test MCP server as a program on the runner's
// machines. By default that program is the test binary itself, started
// again with an environment variable that Serve recognises, so a package
// that runs the suite calls Serve first thing in its TestMain:
//
//	func TestMain(m *testing.M) {
//		runnertest.Serve()
//		os.Exit(m.Run())
//	}
//
// A runner whose machines cannot run this binary (a container image, a
// remote VM) sets Harness.Server to a command that runs the test server
// there.
//
// The cancel check waits for a worker heartbeat that shows the trials in
// flight (the suite sets Params.Heartbeat short); it never relies on a
// sleep.
package runnertest
