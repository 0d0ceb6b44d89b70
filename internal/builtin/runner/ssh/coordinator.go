package ssh

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/runner"
)

// A detached run's coordinator machine (runner.CoordinatorParams) on the
// two runners of this package:
//
//   - ssh: a fresh folder WORKDIR/coordinator-ID on coordinatorHost (the
//     first of hosts by default), with this mst installed as for a worker.
//     The coordinator there logs in to the worker hosts as the host's user,
//     with SSH keys of that user's on that host: MST never copies the
//     user's key there and never forwards the agent. A watchdog (`mst
//     runner watchdog`, below) runs beside it in a session of its own and
//     ends it at the deadline. Finish and Dispose stop the watchdog and
//     delete the folder.
//   - gcloud: a VM mst-coordinator-ID made like the workers' VMs, running
//     as coordinatorServiceAccount, which Compute Engine deletes by itself
//     at the deadline (--max-run-duration with
//     --instance-termination-action=DELETE). Finish deletes it from inside
//     with gcloud; Dispose deletes it from here.
//
// The pid file. The coordinator started on an ssh coordinator machine
// writes its process id, in decimal and alone on a line, to
// WorkDir()/coordinator.pid (CoordinatorPIDFile) once it runs, and leads a
// session of its own (setsid): its id is then its session's and its
// process group's. At the deadline the watchdog sends SIGTERM to that
// process group and to every process of that session (and below it), waits
// up to its grace, sends SIGKILL to whatever is left, and deletes
// WorkDir(). A pid that does not lead a session (on Linux, where /proc
// tells) is taken for a stale file and not signalled; no pid file means no
// coordinator to end. The watchdog writes its own id to
// WorkDir()/watchdog.pid and its messages to WorkDir()/watchdog.log.

// CoordinatorPIDFile is the file in a coordinator machine's WorkDir that
// the coordinator writes its process id to, for the watchdog.
const CoordinatorPIDFile = runner.CoordinatorPIDFile

// Files of the watchdog in the coordinator's folder.
const (
	watchdogPIDFile = "watchdog.pid"
	watchdogLogFile = "watchdog.log"
)

// DefaultWatchdogGrace is how long the coordinator's processes get between
// SIGTERM and SIGKILL at the deadline.
const DefaultWatchdogGrace = 10 * time.Second

// coordinatorFolder names a detached run's folder on its machine.
func coordinatorFolder(id string) string {
	return "coordinator-" + unsafeChars.ReplaceAllString(id, "_")
}

// sshCoordinator makes a detached run's coordinator machine on
// coordinatorHost: it logs in, installs mst there as for a worker, checks
// that the host has SSH credentials of its own to reach the worker hosts
// with, makes the folder and starts the watchdog.
func sshCoordinator(ctx context.Context, p runner.CoordinatorParams) (runner.CoordinatorMachine, error) {
	opts, err := parseSSHOptions(p.Options)
	if err != nil {
		return nil, err
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	deadline := p.Deadline
	if deadline <= 0 {
		deadline = runner.DefaultCoordinatorDeadline
	}
	local, err := inspectLocal(ctx, p.MST, p.MSTVersion)
	if err != nil {
		return nil, fmt.Errorf("ssh runner: %w", err)
	}
	creds, err := newCredentials(opts.connOptions, logger)
	if err != nil {
		return nil, fmt.Errorf("ssh runner: %w", err)
	}
	t := opts.CoordinatorHost
	rem := newSSHRemote(t, creds)
	fail := func(err error) (runner.CoordinatorMachine, error) {
		rem.close()
		creds.close()
		return nil, fmt.Errorf("ssh runner: the coordinator host %s: %w", t, err)
	}
	info, err := probe(ctx, rem)
	if err != nil {
		return fail(err)
	}
	if info.mst, err = ensureMST(ctx, rem, info, local, opts.MST); err != nil {
		return fail(err)
	}
	if err := checkOwnCredentials(ctx, rem, info, p.Options, opts.Strict); err != nil {
		return fail(err)
	}
	work := hostPath(opts.WorkDir, info.home)
	dir := path.Join(work, coordinatorFolder(p.ID))
	if _, err := output(ctx, rem, "mkdir -p "+quote(work)+" && mkdir "+quote(dir)); err != nil {
		return fail(fmt.Errorf("making the folder %s (a detached run's id names one folder only): %w", dir, err))
	}
	pid, err := startWatchdog(ctx, rem, WatchdogArgv(info.mst, dir, deadline), dir)
	if err != nil {
		output(context.WithoutCancel(ctx), rem, "rm -rf "+quote(dir))
		return fail(err)
	}
	logger.Info("coordinator host ready", "host", t.String(), "folder", dir, "deadline", deadline.String(), "watchdog", pid)
	m := &machine{r: rem, id: machineID(t, dir), dir: dir, mst: []string{info.mst}}
	c := &sshCoordinatorMachine{machine: m, creds: creds, target: t, identity: p.Options["identity"], watchdog: pid}
	m.remove = func(ctx context.Context) error {
		if _, err := output(ctx, rem, commandLine(c.Finish())); err != nil {
			// An mst that cannot stop its watchdog still leaves the
			// folder to delete; the watchdog ends once it is gone.
			if _, rerr := output(ctx, rem, "rm -rf "+quote(dir)); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return nil
	}
	return c, nil
}

// checkOwnCredentials checks that the coordinator host has what the
// coordinator needs to log in to the worker hosts from there: the identity
// option's key file, or one of the default key files, and the known_hosts
// file when host keys are checked strictly. An agent does not count: the
// coordinator outlives every SSH session, so no agent reaches it.
func checkOwnCredentials(ctx context.Context, rem remote, info hostInfo, options map[string]string, strict bool) error {
	if id := options["identity"]; id != "" {
		p := hostPath(id, info.home)
		if _, err := output(ctx, rem, "test -r "+quote(p)); err != nil {
			return fmt.Errorf("--runner-option identity=%s: there is no readable key file %s on it; the coordinator logs in to the hosts from there with that path, and MST never copies your key: put a key of the host's own there and authorize it on the hosts, or leave out identity to use its ~/.ssh keys", id, p)
		}
	} else {
		var tests []string
		for _, k := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			tests = append(tests, "test -r "+quote(path.Join(info.home, ".ssh", k)))
		}
		if _, err := output(ctx, rem, strings.Join(tests, " || ")); err != nil {
			return fmt.Errorf("it has no SSH key of its own (~/.ssh/id_ed25519, id_ecdsa or id_rsa there): the detached coordinator logs in to the hosts from it with that user's keys, and MST never copies yours or forwards your agent: run `ssh-keygen -t ed25519 -N ''` there and add the .pub line to ~/.ssh/authorized_keys on every host, or pass --runner-option identity=PATH of a key file that exists there")
		}
	}
	if strict {
		kh := options["knownHosts"]
		if kh == "" {
			kh = defaultKnownHosts
		}
		p := hostPath(kh, info.home)
		if _, err := output(ctx, rem, "test -r "+quote(p)); err != nil {
			return fmt.Errorf("it has no known_hosts file %s: the coordinator checks the hosts' keys against it there: add them with ssh-keyscan on that host, or pass --runner-option knownHosts=PATH of one that exists there", p)
		}
	}
	return nil
}

// startWatchdog starts argv, a watchdog of dir, on the host in a session
// of its own (with setsid where the host has it; the watchdog ignores
// SIGHUP either way), its stdin from /dev/null and its messages in the
// folder's watchdog.log, and returns its process id. The watchdog prints
// its id and closes its stdout, which ends `head` and so the session.
func startWatchdog(ctx context.Context, r remote, argv []string, dir string) (string, error) {
	out, err := output(ctx, r, watchdogStartLine(argv, dir))
	if pid := strings.TrimSpace(out); err == nil && digits.MatchString(pid) {
		return pid, nil
	}
	log, _ := output(context.WithoutCancel(ctx), r, "cat "+quote(path.Join(dir, watchdogLogFile))+" 2>/dev/null; true")
	if err == nil {
		err = fmt.Errorf("it printed %q", out)
	}
	if log = strings.TrimSpace(log); log != "" {
		err = fmt.Errorf("%w: %s", err, log)
	}
	return "", fmt.Errorf("starting the watchdog in %s: %w", dir, err)
}

// watchdogStartLine is the shell command startWatchdog runs.
func watchdogStartLine(argv []string, dir string) string {
	return "s=; command -v setsid >/dev/null 2>&1 && s=setsid; { $s " + commandLine(argv) + " </dev/null 2>>" + quote(path.Join(dir, watchdogLogFile)) + " & } | head -n 1"
}

// WatchdogArgv is the command line that runs the watchdog of the
// coordinator folder dir with mst at mst, for deadline from its start.
func WatchdogArgv(mst, dir string, deadline time.Duration) []string {
	return []string{mst, "runner", "watchdog", "--deadline", deadline.String(), "--dir", dir}
}

// WatchdogStopArgv is the command line that stops the watchdog of dir and
// deletes the folder: a coordinator machine's Finish.
func WatchdogStopArgv(mst, dir string) []string {
	return []string{mst, "runner", "watchdog", "--stop", "--dir", dir}
}

// sshCoordinatorMachine is the coordinator's folder on its host.
type sshCoordinatorMachine struct {
	*machine
	creds    *credentials
	target   target
	identity string
	watchdog string
}

func (c *sshCoordinatorMachine) Env() []string { return nil }

// Finish stops the watchdog and deletes the folder.
func (c *sshCoordinatorMachine) Finish() []string {
	return WatchdogStopArgv(c.mst[0], c.dir)
}

func (c *sshCoordinatorMachine) Identity() string {
	keys := "its own SSH keys there (~/.ssh/id_ed25519, id_ecdsa or id_rsa)"
	if c.identity != "" {
		keys = "the key file " + c.identity + " on that host"
	}
	return "the user " + c.target.User + " on " + c.target.Addr() + "; it logs in to the hosts with " + keys + ": your key and agent are not copied or forwarded there"
}

// Dispose stops the watchdog, deletes the folder and closes the
// connection; later calls do nothing.
func (c *sshCoordinatorMachine) Dispose(ctx context.Context) error {
	err := c.machine.Remove(ctx)
	if err == nil {
		c.creds.close()
	}
	return err
}

// Close closes the connection to the host and leaves the coordinator
// running: for the launching mst once the coordinator has started.
func (c *sshCoordinatorMachine) Close() error {
	err := c.r.close()
	c.creds.close()
	return err
}

// WatchdogCommand is `mst runner watchdog --dir DIR --deadline D [--grace
// G]`, run on a coordinator machine in a session of its own: it writes its
// pid to DIR/watchdog.pid, prints it and closes its stdout, and waits. At
// the deadline it ends the coordinator whose pid is in
// DIR/coordinator.pid (see the pid file above) and deletes DIR. It ends
// quietly on SIGTERM or SIGINT, or when DIR is gone. `mst runner watchdog
// --stop --dir DIR` stops the watchdog of DIR and deletes DIR.
func WatchdogCommand() runner.MachineCommand {
	return runner.MachineCommand{
		Name:  "watchdog",
		Usage: "--dir DIR (--deadline D [--grace G] | --stop)",
		Short: "End a detached run's coordinator at its deadline and delete its folder (run on a coordinator machine)",
		Run:   runWatchdog,
	}
}

func runWatchdog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("watchdog", flag.ContinueOnError)
	fset.SetOutput(stderr)
	dir := fset.String("dir", "", "the coordinator's folder")
	deadline := fset.Duration("deadline", 0, "how long from now the coordinator may run")
	grace := fset.Duration("grace", DefaultWatchdogGrace, "how long its processes get between SIGTERM and SIGKILL")
	stop := fset.Bool("stop", false, "stop the watchdog of --dir and delete the folder")
	if err := fset.Parse(args); err != nil {
		return err
	}
	switch {
	case fset.NArg() > 0:
		return fmt.Errorf("watchdog: unexpected arguments %q", fset.Args())
	case *dir == "" || !filepath.IsAbs(*dir):
		return fmt.Errorf("watchdog: --dir %q: give the coordinator's folder as an absolute path", *dir)
	case *stop:
		return stopWatchdog(*dir)
	case *deadline <= 0:
		return errors.New("watchdog: --deadline: give how long the coordinator may run, such as 24h")
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return fmt.Errorf("watchdog: --dir %s is not a folder", *dir)
	}
	// The session that started the watchdog ends right after.
	signal.Ignore(syscall.SIGHUP)
	timer := time.NewTimer(*deadline)
	defer timer.Stop()
	pid := strconv.Itoa(os.Getpid())
	if err := writeFileAtomic(filepath.Join(*dir, watchdogPIDFile), pid+"\n"); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	fmt.Fprintln(stdout, pid)
	if f, ok := stdout.(*os.File); ok {
		f.Close()
	}
	gone := time.NewTicker(5 * time.Second)
	defer gone.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-gone.C:
			if _, err := os.Stat(*dir); errors.Is(err, fs.ErrNotExist) {
				return nil
			}
		case <-timer.C:
			fmt.Fprintf(stderr, "%s: the deadline (%s) has passed: ending the coordinator and deleting %s\n", time.Now().UTC().Format(time.RFC3339), *deadline, *dir)
			endCoordinator(filepath.Join(*dir, CoordinatorPIDFile), *grace, stderr)
			if err := os.RemoveAll(*dir); err != nil {
				return fmt.Errorf("watchdog: %w", err)
			}
			return nil
		}
	}
}

// stopWatchdog ends the watchdog of dir, waiting a little for it to go,
// and deletes dir.
func stopWatchdog(dir string) error {
	if pid, err := readPID(filepath.Join(dir, watchdogPIDFile)); err == nil && isWatchdogOf(pid, dir) {
		if p, err := os.FindProcess(pid); err == nil {
			p.Signal(syscall.SIGTERM)
			waitEnded([]int{pid}, 5*time.Second)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	return nil
}

// endCoordinator ends the coordinator whose pid is in pidFile with its
// session: SIGTERM, up to grace, SIGKILL.
func endCoordinator(pidFile string, grace time.Duration, log io.Writer) {
	pid, err := readPID(pidFile)
	if err != nil {
		fmt.Fprintf(log, "no coordinator to end: %v\n", err)
		return
	}
	if s, ok := procSession(pid); ok && s != pid {
		fmt.Fprintf(log, "process %d does not lead a session: the pid file is stale; nothing signalled\n", pid)
		return
	}
	seen := map[int]bool{pid: true}
	targets := func() []int {
		for _, p := range sessionMembers(pid) {
			seen[p] = true
		}
		for _, p := range proctree.Descendants(pid) {
			seen[p] = true
		}
		out := make([]int, 0, len(seen))
		for p := range seen {
			out = append(out, p)
		}
		return out
	}
	send := func(sig syscall.Signal) {
		proctree.KillGroup(pid, sig)
		for _, p := range targets() {
			if proc, err := os.FindProcess(p); err == nil {
				proc.Signal(sig)
			}
		}
	}
	send(syscall.SIGTERM)
	if !waitEnded(targets(), grace) {
		fmt.Fprintf(log, "the coordinator's processes did not end within %s of SIGTERM: sending SIGKILL\n", grace)
	}
	send(syscall.SIGKILL)
}

// waitEnded waits up to limit for every process of pids to end, and
// reports whether they did.
func waitEnded(pids []int, limit time.Duration) bool {
	end := time.Now().Add(limit)
	for {
		alive := false
		for _, p := range pids {
			alive = alive || !ended(p)
		}
		if !alive {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ended reports whether process pid has exited: from /proc where there is
// one (a zombie has ended), else by signal 0.
func ended(pid int) bool {
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		return proctree.Ended(pid)
	}
	p, err := os.FindProcess(pid)
	return err != nil || p.Signal(syscall.Signal(0)) != nil
}

// readPID reads a pid file: a number above 1, alone on its line.
func readPID(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s holds %q, not a process id", file, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// procSession reads a process's session id from /proc/PID/stat; false
// where there is no /proc or no such process.
func procSession(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	// After the command: state, ppid, pgrp, session.
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return 0, false
	}
	sid, err := strconv.Atoi(f[3])
	return sid, err == nil
}

// sessionMembers lists the processes of session sid, from /proc.
func sessionMembers(sid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := procSession(p); ok && s == sid {
			out = append(out, p)
		}
	}
	return out
}

// isWatchdogOf reports whether pid is the watchdog of dir; where /proc
// cannot tell, it trusts the pid file.
func isWatchdogOf(pid int, dir string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		_, noProc := os.Stat("/proc/self/cmdline")
		return noProc != nil
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	hasWatchdog, hasDir := false, false
	for i, a := range args {
		hasWatchdog = hasWatchdog || a == "watchdog"
		hasDir = hasDir || (a == "--dir" && i+1 < len(args) && args[i+1] == dir) || a == "--dir="+dir
	}
	return hasWatchdog && hasDir
}

// writeFileAtomic writes a file under a temporary name and renames it.
func writeFileAtomic(file, content string) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// gcloudCoordinator makes a detached run's coordinator VM: created like a
// worker's, running as coordinatorServiceAccount, deleted by Compute
// Engine at the deadline. A VM that cannot be made ready is deleted.
func gcloudCoordinator(ctx context.Context, p runner.CoordinatorParams) (_ runner.CoordinatorMachine, err error) {
	o, err := parseGcloudOptions(p.Options)
	if err != nil {
		return nil, err
	}
	if o.CoordinatorSA == "" {
		return nil, errors.New("gcloud runner: a detached run needs --runner-option coordinatorServiceAccount=NAME@PROJECT.iam.gserviceaccount.com, the service account its coordinator VM runs as (docs/ssh.md lists the roles it needs); your gcloud login is never copied to the VM")
	}
	deadline := p.Deadline
	if deadline <= 0 {
		deadline = runner.DefaultCoordinatorDeadline
	}
	if deadline < 30*time.Second || deadline > 120*24*time.Hour {
		return nil, fmt.Errorf("gcloud runner: a coordinator deadline of %s is outside what Compute Engine's --max-run-duration takes (30s to 120 days)", deadline)
	}
	r, err := newGcloudRunner(ctx, runner.Params{Options: p.Options, MST: p.MST, MSTVersion: p.MSTVersion, Logger: p.Logger})
	if err != nil {
		return nil, err
	}
	g := r.(*gcloudRunner)
	name := coordinatorName(p.ID)
	m, err := readyVM(ctx, o, name, coordinatorCreateArgs(o, name, p.ID, deadline), coordinatorFolder(p.ID), g.local, g.logger, "the coordinator VM")
	if err != nil {
		return nil, err
	}
	return &gcloudCoordinatorMachine{machine: m, o: o, name: name}, nil
}

// coordinatorCreateArgs creates a detached run's coordinator VM: as a
// worker's, but running as the coordinator's service account with the
// cloud-platform scope (its roles then say what it may do), deleted by
// Compute Engine after deadline, and labelled with the detached run's id.
func coordinatorCreateArgs(o gcloudOptions, name, id string, deadline time.Duration) []string {
	a := vmArgs(o, name)
	a = append(a, "--service-account="+o.CoordinatorSA, "--scopes=cloud-platform")
	a = append(a, maxRunArgs(deadline)...)
	return append(a, "--labels=mst-detached="+labelValue(id), "--quiet")
}

// coordinatorName is runner.CoordinatorName.
func coordinatorName(id string) string { return runner.CoordinatorName(id) }

// gcloudCoordinatorMachine is a detached run's coordinator VM.
type gcloudCoordinatorMachine struct {
	*machine
	o    gcloudOptions
	name string
}

func (c *gcloudCoordinatorMachine) Env() []string { return nil }

// Finish deletes the VM from inside, with its service account.
func (c *gcloudCoordinatorMachine) Finish() []string {
	return append([]string{c.o.Gcloud}, deleteArgs(c.o, c.name)...)
}

func (c *gcloudCoordinatorMachine) Identity() string {
	return "the service account " + c.o.CoordinatorSA + " on the Compute Engine VM " + c.id +
		" (from the VM's metadata server; your gcloud login is not copied there)"
}

// Dispose deletes the VM; later calls do nothing.
func (c *gcloudCoordinatorMachine) Dispose(ctx context.Context) error {
	return c.machine.Remove(ctx)
}
