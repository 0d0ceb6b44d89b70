// Package docker is the docker runner: each shard of a run gets a container
// of its own on a Docker host, reached through the Docker CLI (the docker
// command, with the daemon it is set up for: DOCKER_HOST, its context).
//
// # Lifecycle
//
// `mst runner setup docker` (Setup) builds the worker image once per MST
// version: FROM scratch, with this mst binary at /mst, tagged
// mst-worker:<version>. The binary must be a static Linux build for the
// Docker host's architecture; Setup says how to build one when it is not.
// With --with (SetupParams.With) it builds instead a worker image with a
// userland from the Dockerfiles in images/: Debian slim with mst, and Node
// 22 with the npm servers and CLIs named, installed by npm on the machine
// that runs setup (userland.go); with desktop, a desktop for desktop
// clients on the Python image, and with the desktopPackage option an app's
// image on that (desktopimage.go).
// With --runner-option image=REF a run uses an image of its own instead:
// any Linux image, labelled or not, that holds the same MST version (at
// /mst, or where the mst option says).
//
// New checks that the daemon answers and finds the image, which it then
// pins by id, so every shard of the run starts from the same image even if
// the tag moves; an image of one's own has its mst asked for its version
// once there (docker run --rm … version), so a wrong one fails the run
// before any shard. Each machine records the image as NAME@sha256:…, with
// the registry's digest when the image has one (RepoDigests) and else its
// id. RunShard runs one shard through runner.MachineRunner:
//
//  1. docker run -d starts a container named mst-<run>-<shard>, labelled
//     mst.run, mst.shard and mst.version, with no-new-privileges, a fresh
//     tmpfs at /run/mst (mode 0700, where the worker keeps tokens) and at
//     /tmp, and mst's hidden `runner idle` command as its main process,
//     whose `mst version` is then checked against the coordinator's;
//  2. the bundle is copied to /work/bundle (docker cp of a tar stream);
//  3. the worker runs as docker exec -i … mst collect, its stdin and stdout
//     carrying mst.shard/v1;
//  4. each transcript is copied back as the worker reports it;
//  5. docker rm -f removes the container, unless keep says to keep it.
//
// A container of a desktop image (labelled mst.desktop, desktop.go) runs
// `runner idle` through the image's mst-desktop-session, which starts the
// desktop first, with more shared memory, /run/mst owned by the desktop
// user and, with the view option, a live view on this machine's loopback;
// step 1 waits until its desktop is up. With the exclusive option, one
// shard's container lives at a time: a shard waits for its turn before
// step 1 and hands it on after step 5.
//
// Close has nothing to release. Leftovers lists the containers carrying an
// mst.run label (kept, or orphaned by a coordinator that died) and the
// detached runs' coordinator containers (mst.coordinator), and Remove
// deletes one: `mst runner cleanup RUN`.
//
// # Detached runs
//
// CreateCoordinator makes a detached run's coordinator machine: a
// container mst-coordinator-<id> of the worker image, started with --rm
// and `mst runner idle --deadline D`, with the Docker daemon's socket and
// this machine's docker CLI (and, for a dynamic one, its loader and
// libraries) mounted, so the coordinator inside runs `mst run --runner
// docker` and starts the workers beside it on the same host.
//
// # MCP servers
//
// A worker starts a variant's stdio servers inside its container, so each
// server's command must exist there. On a local Docker host, the folder of
// each command given as an absolute path is bind-mounted read-only at the
// same path (and so is a server's working folder, or the eval config's
// folder when the working folder is inside it), so a static server binary
// built next to the eval runs unchanged. Commands in system folders
// (/usr, /bin, …) and bare names (node, npx) are not mounted: they must be
// in the image. Set mounts=false for a remote Docker host, where host paths
// mean nothing.
//
// # Stopping a command
//
// Killing the docker CLI does not stop a command it started with docker
// exec. So Exec marks each command with an environment variable, and when
// its context ends it runs `mst runner stop-exec MARKER` in the container,
// which sends the marked processes SIGTERM and, after a grace period,
// SIGKILL (StopExec).
package docker
