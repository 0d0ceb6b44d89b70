package ssh

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// sshOptionsSchema is the JSON Schema of the ssh runner's options.
const sshOptionsSchema = `{"type":"object","additionalProperties":false,"properties":{
  "hosts": {"type":"string","description":"Required: the hosts, comma-separated, each user@host[:port] (user defaults to yours, port to 22). Shard i runs on host i mod the number of hosts."},
  "identity": {"type":"string","description":"Private key file to log in with. A key with a passphrase must go through the agent.","x-defaultDescription":"the SSH agent at SSH_AUTH_SOCK if set, else ~/.ssh/id_ed25519, id_ecdsa and id_rsa"},
  "knownHosts": {"type":"string","description":"known_hosts file with the hosts' keys.","default":"~/.ssh/known_hosts"},
  "strictHostKeyChecking": {"type":"boolean","description":"Refuse a host whose key is not in knownHosts. false accepts unknown keys, still refuses changed ones, and logs a warning.","default":true},
  "workDir": {"type":"string","description":"Folder on each host for the shards' work folders; relative paths and ~ start at the host user's HOME.","default":"~/.cache/mst/work"},
  "mst": {"type":"string","description":"Path of an mst of this same version already on every host.","x-defaultDescription":"MST copies itself to ~/.cache/mst/bin on each host"},
  "coordinatorHost": {"type":"string","description":"Host a detached run's coordinator runs on (mst run --detach), user@host[:port]. It logs in to the hosts from there with SSH keys of its own on that host: yours are never copied there.","x-defaultDescription":"the first of hosts"}
}}`

// Defaults of the options.
const (
	defaultWorkDir    = "~/.cache/mst/work"
	defaultKnownHosts = "~/.ssh/known_hosts"
	binDir            = "~/.cache/mst/bin"
)

// target is one host to log in to.
type target struct {
	User, Host, Port string
}

// Addr is host:port, as net.Dial takes it.
func (t target) Addr() string { return net.JoinHostPort(t.Host, t.Port) }

// String is user@host:port, the form the hosts option takes.
func (t target) String() string { return t.User + "@" + t.Addr() }

// parseTarget reads user@host[:port]; a missing user is defaultUser and a
// missing port is 22. IPv6 addresses with a port go in brackets.
func parseTarget(s, defaultUser string) (target, error) {
	t := target{User: defaultUser, Port: "22"}
	rest := strings.TrimSpace(s)
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		t.User, rest = rest[:i], rest[i+1:]
		if t.User == "" {
			return t, fmt.Errorf("host %q: the user before @ is empty", s)
		}
	}
	switch {
	case strings.HasPrefix(rest, "["):
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			if h, ok := strings.CutSuffix(strings.TrimPrefix(rest, "["), "]"); ok {
				host, port, err = h, t.Port, nil
			} else {
				return t, fmt.Errorf("host %q: write user@host:port, with IPv6 addresses in brackets: user@[::1]:22", s)
			}
		}
		t.Host, t.Port = host, port
	case strings.Count(rest, ":") == 1:
		host, port, _ := strings.Cut(rest, ":")
		t.Host, t.Port = host, port
	default:
		// A plain name, or an IPv6 address without a port.
		t.Host = rest
	}
	if t.Host == "" {
		return t, fmt.Errorf("host %q: no host name", s)
	}
	if n, err := strconv.Atoi(t.Port); err != nil || n < 1 || n > 65535 {
		return t, fmt.Errorf("host %q: port %q is not a number from 1 to 65535", s, t.Port)
	}
	return t, nil
}

// parseHosts reads the hosts option.
func parseHosts(s, defaultUser string) ([]target, error) {
	var out []target
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		t, err := parseTarget(part, defaultUser)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("no hosts: pass --runner-option hosts=user@host[:port] (several separated by commas)")
	}
	return out, nil
}

// connOptions say how to log in to hosts and check their keys: the options
// the ssh and gcloud runners' own SSH connections share.
type connOptions struct {
	// Identity is a private key file, or "" for the agent and default
	// keys.
	Identity   string
	KnownHosts string
	Strict     bool
}

// sshOptions are the ssh runner's options, read and checked.
type sshOptions struct {
	connOptions
	Hosts []target
	// WorkDir and MST are as the user gave them: ~ and relative paths are
	// resolved against each host's HOME once MST has logged in.
	WorkDir string
	MST     string
	// CoordinatorHost is where a detached run's coordinator runs: the
	// coordinatorHost option, else the first of Hosts.
	CoordinatorHost target
}

// parseSSHOptions reads the ssh runner's options (already checked against
// its schema by the CLI, so keys are known and booleans parse).
func parseSSHOptions(m map[string]string) (sshOptions, error) {
	o := sshOptions{WorkDir: defaultWorkDir, MST: m["mst"]}
	if v := m["workDir"]; v != "" {
		o.WorkDir = v
	}
	var err error
	if o.connOptions, err = parseConnOptions(m); err != nil {
		return o, err
	}
	if m["hosts"] == "" {
		return o, errors.New("ssh runner: no hosts: pass --runner-option hosts=user@host[:port] (several separated by commas)")
	}
	if o.Hosts, err = parseHosts(m["hosts"], localUser()); err != nil {
		return o, fmt.Errorf("--runner-option hosts: %w", err)
	}
	o.CoordinatorHost = o.Hosts[0]
	if v := m["coordinatorHost"]; v != "" {
		if strings.Contains(v, ",") {
			return o, fmt.Errorf("--runner-option coordinatorHost=%s: name one host, user@host[:port]; the coordinator runs on a single machine", v)
		}
		if o.CoordinatorHost, err = parseTarget(v, localUser()); err != nil {
			return o, fmt.Errorf("--runner-option coordinatorHost: %w", err)
		}
	}
	return o, nil
}

// parseConnOptions reads identity, knownHosts and strictHostKeyChecking,
// expanding ~ in the local paths.
func parseConnOptions(m map[string]string) (connOptions, error) {
	o := connOptions{Strict: true, KnownHosts: defaultKnownHosts}
	if v := m["strictHostKeyChecking"]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("--runner-option strictHostKeyChecking=%s: write true or false", v)
		}
		o.Strict = b
	}
	if v := m["knownHosts"]; v != "" {
		o.KnownHosts = v
	}
	var err error
	if o.KnownHosts, err = expandLocal(o.KnownHosts); err != nil {
		return o, err
	}
	if v := m["identity"]; v != "" {
		if o.Identity, err = expandLocal(v); err != nil {
			return o, err
		}
	}
	return o, nil
}

// expandLocal turns a leading ~ into this user's home folder.
func expandLocal(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expanding %s: %w", p, err)
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}

// localUser is the user MST runs as, the default user on hosts.
func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// schema returns a JSON schema constant as raw JSON, panicking on a typo.
func schema(s string) json.RawMessage {
	if !json.Valid([]byte(s)) {
		panic("internal/builtin/runner/ssh: invalid options schema")
	}
	return json.RawMessage(s)
}
