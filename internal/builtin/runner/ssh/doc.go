// Package ssh holds two runners whose machines are hosts reached over
// SSH: ssh, for hosts the user lists, and gcloud, for Compute Engine VMs
// it creates and reaches through Identity-Aware Proxy.
//
// # The ssh runner
//
// The user lists hosts (--runner-option hosts=user@host[:port],…); shard i
// runs on hosts[i mod len(hosts)], so several shards may share a host. MST
// logs in with the user's own keys (the SSH agent, a key file) and checks
// each host's key against a known_hosts file, strictly unless the user
// turns that off. It reads no ~/.ssh/config.
//
// A run's lifecycle:
//
//  1. New logs in to every host once, before the run starts, so a host
//     that cannot be reached, an unknown host key or a missing mst fails
//     the command before any trial. There it reads the host's HOME and
//     `uname -sm`, and makes sure an mst of this very version is there:
//     it copies this binary to ~/.cache/mst/bin/VERSION-GOOS-GOARCH-HASH/mst
//     on the host (once per host and build: HASH is the binary's), or,
//     with --runner-option mst=PATH, checks that PATH reports the same
//     version. A host of another OS or architecture is refused with what
//     to do, since the binary would not run there.
//  2. RunShard makes the shard's machine: a new SSH connection of its own
//     and a fresh work folder WORK/RUN-shard-N on the host (…-attempt-K
//     when a resumed run runs the shard again). runner.MachineRunner does
//     the rest over that machine's channel.
//  3. The machine's Exec runs a command in an SSH session, its stdin and
//     stdout attached, from the work folder, and learns its process id.
//     When its context ends, the command is stopped in steps: stdin
//     closes (a worker then cancels its trials and says done), then
//     `kill -TERM` to the program and `kill -KILL` to its process group
//     run in second sessions (OpenSSH refuses session signals to root
//     logins), then the session closes.
//  4. CopyTo and CopyFrom stream a tar archive through a session (tar -x
//     or tar -c on the host, archive/tar here), so hosts need tar and a
//     POSIX shell, but no sftp.
//  5. Remove deletes the work folder and closes the connection; a kept
//     machine's connection closes when its shard ends.
//
// A dropped connection ends the worker's stdin on the host, so it cancels
// what is in flight and exits; the coordinator marks the shard lost, the
// transcripts it already copied back stay, and `mst run --resume` runs the
// rest. Remove then logs in again to delete the folder. Each connection
// sends keepalives, so a silent network failure is noticed too.
//
// MCP servers run where the worker runs, on the host: a stdio server's
// command must exist there at the path the eval names. Leftovers lists the
// work folders runs left on the hosts; Remove deletes one.
//
// # The gcloud runner
//
// gcloud creates one VM per shard (gcloud compute instances create, with
// labels mst-run and mst-shard), reaches it with gcloud compute ssh and
// gcloud compute scp through IAP (--tunnel-through-iap), installs mst on
// it the same way, and deletes it with gcloud compute instances delete.
// Its commands are built by pure functions that the tests check argument
// by argument; it has not been run against Google Cloud (docs/ssh.md).
package ssh
