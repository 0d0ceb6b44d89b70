// Package kubernetes is the kubernetes runner: each shard of a run gets a
// pod of its own in a namespace the user names, reached through the
// kubectl command (with the user's kubeconfig and context, or the ones the
// kubeconfig and context options name).
//
// # Contract
//
// The runner needs kubectl on PATH, a cluster it can reach, and in the
// namespace the rights listed in Rights (create, get, list, watch and
// delete on pods; create and get on pods/exec), which New checks with
// kubectl auth can-i before anything starts. The worker image must hold
// this MST version at the path the mst option gives (/mst by default) and
// must be pullable by the cluster's nodes. By default it is DefaultImage,
// the Debian worker image `mst runner setup docker --with debian` builds
// (mst-worker:<version>-debian), which is only on the local Docker host,
// so a real cluster needs it pushed to a registry (--runner-option
// image=REF) or loaded into the nodes (kind load, minikube image load).
// Copies run tar inside the pod, which each new pod checks, and stopping a
// cancelled command runs env there, so the image needs both (a busybox is
// enough); the Debian images have them, the FROM-scratch image has
// neither, which is why the tar and env options exist (see
// docs/kubernetes.md). A worker's pod sets MST_CLIENT_SETUP, so a worker
// whose CLI client is missing from the image says which setup command
// builds one that has it.
//
// Pods meet the restricted Pod Security Standard unless the podSecurity
// option says baseline: they run as a uid other than root (DefaultUser
// unless runAsUser names one), with every capability dropped, no privilege
// escalation and the runtime's default seccomp profile. The placement
// options (placement.go) add resources, a node selector, tolerations and
// image pull secrets, to the workers' pods and the coordinator's alike.
//
// # Lifecycle
//
// New checks the options and that kubectl answers for the namespace.
// RunShard runs one shard through runner.MachineRunner:
//
//  1. kubectl create -f - makes a pod named mst-<run>-<shard>, labelled
//     mst.run, mst.shard and mst.version, whose one container runs mst's
//     hidden `runner idle` as the security profile says, with an in-memory
//     emptyDir at /run/mst (the worker's tokens) and emptyDirs at the work
//     folder and /tmp; kubectl wait then waits for it to be Ready and
//     prints it, whose status gives the digest of its image for run.json
//     (Machine.Image: NAME@DIGEST, or the image as named when the cluster
//     reports none); mst version run in it must print the coordinator's
//     version, and tar must run;
//  2. the bundle is copied to WORK/bundle as a tar stream piped into tar
//     through kubectl exec -i;
//  3. the worker runs as kubectl exec -i … mst collect, its stdin and
//     stdout carrying mst.shard/v1;
//  4. each transcript is copied back through tar the same way;
//  5. kubectl delete pod removes the pod, unless keep says to keep it.
//
// Close has nothing to release. Leftovers lists the pods carrying an
// mst.run label in the namespace, and detached runs' coordinator pods
// (mst.coordinator), and Remove deletes one, for `mst runner cleanup RUN`.
//
// # Detached runs
//
// CreateCoordinator makes a detached run's coordinator pod,
// mst-coordinator-<id>, running as the coordinatorServiceAccount option's
// account from an image with mst and kubectl (coordinator.go says how it
// ends and what it may do).
//
// # Stopping a command
//
// Killing kubectl does not stop the command it started in the pod. When
// the env option names an env program in the image, Exec starts each
// command as `env MST_EXEC=<marker> argv…`, and when its context ends it
// runs `mst runner stop-exec MARKER` in the pod, as the docker runner does.
// Without it, the command is left to end with its stdin or with the pod.
package kubernetes
