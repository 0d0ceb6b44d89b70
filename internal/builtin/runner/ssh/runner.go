package ssh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/mst-eval/mst/runner"
)

// MaxShards is the most shards the ssh runner runs at once.
const MaxShards = 64

// Definition is the ssh runner.
func Definition() *runner.Definition {
	return &runner.Definition{
		Name:        "ssh",
		Description: "Runs each shard in a work folder on a host reached over SSH (hosts=user@host[:port],…), with the user's keys and known_hosts.",
		// Hosts may run any OS; clients' OS requirements are checked by
		// the workers.
		OS:        "",
		Options:   schema(sshOptionsSchema),
		MaxShards: MaxShards,
		New:       newSSHRunner,
		Leftovers: sshLeftovers,
		Remove:    sshRemove,
		// A detached run's coordinator runs on coordinatorHost, with a
		// watchdog beside it that ends it at its deadline.
		Coordinator:     sshCoordinator,
		MachineCommands: []runner.MachineCommand{WatchdogCommand()},
	}
}

// sshRunner is the ssh runner for one run.
type sshRunner struct {
	params runner.Params
	opts   sshOptions
	creds  *credentials
	logger *slog.Logger
	// hosts are what MST learned about each host, by target.
	hosts map[target]hostInfo
}

// newSSHRunner logs in to every host, reads its HOME and platform and
// makes sure it has this mst, all before the run starts.
func newSSHRunner(ctx context.Context, p runner.Params) (runner.Runner, error) {
	opts, err := parseSSHOptions(p.Options)
	if err != nil {
		return nil, err
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	local, err := inspectLocal(ctx, p.MST, p.MSTVersion)
	if err != nil {
		return nil, fmt.Errorf("ssh runner: %w", err)
	}
	creds, err := newCredentials(opts.connOptions, logger)
	if err != nil {
		return nil, fmt.Errorf("ssh runner: %w", err)
	}
	r := &sshRunner{params: p, opts: opts, creds: creds, logger: logger, hosts: map[target]hostInfo{}}
	var unique []target
	for _, t := range opts.Hosts {
		if _, seen := r.hosts[t]; !seen {
			r.hosts[t] = hostInfo{}
			unique = append(unique, t)
		}
	}
	infos := make([]hostInfo, len(unique))
	errs := make([]error, len(unique))
	var wg sync.WaitGroup
	for i, t := range unique {
		wg.Go(func() { infos[i], errs[i] = prepareHost(ctx, t, creds, local, opts.MST) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		creds.close()
		return nil, fmt.Errorf("ssh runner: %w", err)
	}
	for i, t := range unique {
		r.hosts[t] = infos[i]
		logger.Info("host ready", "host", t.String(), "platform", infos[i].goos+"/"+infos[i].goarch, "mst", infos[i].mst)
	}
	return r, nil
}

// prepareHost logs in to t once, probes it and makes sure it has mst.
func prepareHost(ctx context.Context, t target, creds *credentials, local *localMST, given string) (hostInfo, error) {
	rem := newSSHRemote(t, creds)
	defer rem.close()
	info, err := probe(ctx, rem)
	if err != nil {
		return info, err
	}
	if info.mst, err = ensureMST(ctx, rem, info, local, given); err != nil {
		return info, err
	}
	return info, nil
}

// RunShard runs one shard through runner.MachineRunner on a machine made
// for it, and closes the machine's connection when the shard ends (a kept
// machine keeps its folder, not its connection).
func (r *sshRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	var made *machine
	create := func(ctx context.Context, i int) (runner.Machine, error) {
		m, err := r.create(ctx, s.Run, max(s.Attempt, 1), i, s.Work == "grade")
		if err != nil {
			return nil, err
		}
		made = m
		return m, nil
	}
	rep, err := runner.MachineRunner(create, r.params).RunShard(ctx, s)
	if made != nil {
		made.r.close()
	}
	return rep, err
}

// create makes shard i's machine: a connection of its own to its host and
// a fresh work folder there.
func (r *sshRunner) create(ctx context.Context, runID string, attempt, i int, grading bool) (*machine, error) {
	t := r.opts.Hosts[i%len(r.opts.Hosts)]
	info := r.hosts[t]
	rem := newSSHRemote(t, r.creds)
	dir := path.Join(hostPath(r.opts.WorkDir, info.home), folderName(runID, i, attempt, grading))
	if _, err := output(ctx, rem, "mkdir -p "+quote(dir)); err != nil {
		rem.close()
		return nil, fmt.Errorf("making the work folder %s on %s: %w", dir, t, err)
	}
	return &machine{r: rem, id: machineID(t, dir), dir: dir, mst: []string{info.mst}}, nil
}

// Close releases the agent connection. Machines close their own
// connections.
func (r *sshRunner) Close() error {
	if r != nil {
		r.creds.close()
	}
	return nil
}

// folderName names a shard's work folder: RUN-shard-N, with -attempt-K
// for the shards of a resumed run, so a kept folder of an earlier attempt
// is never reused, and -grade for a shard that grades.
func folderName(runID string, shard, attempt int, grading bool) string {
	name := unsafeChars.ReplaceAllString(runID, "_") + "-shard-" + strconv.Itoa(shard)
	if attempt > 1 {
		name += "-attempt-" + strconv.Itoa(attempt)
	}
	if grading {
		name += "-grade"
	}
	return name
}

var folderPattern = regexp.MustCompile(`^(.+)-shard-([0-9]+)(?:-attempt-([0-9]+))?$`)

// machineID names a machine: ssh://user@host:port/path/of/work/folder.
func machineID(t target, dir string) string {
	u := url.URL{Scheme: "ssh", User: url.User(t.User), Host: t.Addr(), Path: dir}
	return u.String()
}

// parseMachineID reverses machineID.
func parseMachineID(id string) (target, string, error) {
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "ssh" || u.User == nil || u.Path == "" {
		return target{}, "", fmt.Errorf("%q is not a machine of the ssh runner (ssh://user@host:port/folder)", id)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, "22"
	}
	return target{User: u.User.Username(), Host: host, Port: port}, u.Path, nil
}

// sshLeftovers lists the work folders on every host of options that runs
// left behind, those of runID only unless it is "".
func sshLeftovers(ctx context.Context, options map[string]string, runID string) ([]runner.Leftover, error) {
	opts, err := parseSSHOptions(options)
	if err != nil {
		return nil, err
	}
	creds, err := newCredentials(opts.connOptions, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer creds.close()
	var out []runner.Leftover
	var errs []error
	seen := map[target]bool{}
	for _, t := range opts.Hosts {
		if seen[t] {
			continue
		}
		seen[t] = true
		found, err := hostLeftovers(ctx, t, creds, opts.WorkDir, runID)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, found...)
	}
	return out, errors.Join(errs...)
}

// hostLeftovers lists the work folders on one host.
func hostLeftovers(ctx context.Context, t target, creds *credentials, workDir, runID string) ([]runner.Leftover, error) {
	rem := newSSHRemote(t, creds)
	defer rem.close()
	info, err := probe(ctx, rem)
	if err != nil {
		return nil, err
	}
	work := hostPath(workDir, info.home)
	list, err := output(ctx, rem, "cd "+quote(work)+" 2>/dev/null || exit 0; for d in *-shard-*; do [ -d \"$d\" ] && printf '%s\\n' \"$d\"; done; true")
	if err != nil {
		return nil, fmt.Errorf("listing %s on %s: %w", work, t, err)
	}
	var out []runner.Leftover
	for _, name := range strings.Split(strings.TrimSpace(list), "\n") {
		m := folderPattern.FindStringSubmatch(name)
		if m == nil || (runID != "" && m[1] != unsafeChars.ReplaceAllString(runID, "_")) {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		out = append(out, runner.Leftover{ID: machineID(t, path.Join(work, name)), Run: m[1], Shard: n, Detail: "work folder on " + t.String()})
	}
	return out, nil
}

// sshRemove deletes one leftover work folder. Its host must be one of the
// hosts option's, and its folder must be named like a shard's.
func sshRemove(ctx context.Context, options map[string]string, l runner.Leftover) error {
	opts, err := parseSSHOptions(options)
	if err != nil {
		return err
	}
	t, dir, err := parseMachineID(l.ID)
	if err != nil {
		return err
	}
	listed := false
	for _, h := range opts.Hosts {
		listed = listed || h == t
	}
	if !listed {
		return fmt.Errorf("%s is on %s, which --runner-option hosts does not list", l.ID, t)
	}
	if !folderPattern.MatchString(path.Base(dir)) {
		return fmt.Errorf("%s is not a shard's work folder (RUN-shard-N)", l.ID)
	}
	creds, err := newCredentials(opts.connOptions, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer creds.close()
	m := &machine{r: newSSHRemote(t, creds), id: l.ID, dir: dir}
	return m.Remove(ctx)
}
