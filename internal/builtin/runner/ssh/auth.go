package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// credentials are how MST logs in to hosts and checks their keys, made
// once per runner.
type credentials struct {
	auth []ssh.AuthMethod
	// authFrom says where the keys came from, for error messages.
	authFrom string
	hostKeys *hostKeys
	// agentConn is the connection to the SSH agent, if one is used.
	agentConn net.Conn
}

// close releases the agent connection.
func (c *credentials) close() {
	if c != nil && c.agentConn != nil {
		c.agentConn.Close()
	}
}

// newCredentials loads the keys o names and the known_hosts file. A
// strictHostKeyChecking=false is logged as a warning.
func newCredentials(o connOptions, logger *slog.Logger) (*credentials, error) {
	c := &credentials{}
	var err error
	if c.hostKeys, err = loadHostKeys(o.KnownHosts, o.Strict); err != nil {
		return nil, err
	}
	if !o.Strict {
		logger.Warn("strictHostKeyChecking=false: hosts whose key is not in " + o.KnownHosts + " are accepted, so anyone who can intercept the connection can pose as them")
	}
	if o.Identity != "" {
		signer, err := readKey(o.Identity)
		if err != nil {
			return nil, err
		}
		c.auth = []ssh.AuthMethod{ssh.PublicKeys(signer)}
		c.authFrom = "the key " + o.Identity
		return c, nil
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			c.agentConn = conn
			c.auth = []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(conn).Signers)}
			c.authFrom = "the keys of the SSH agent at SSH_AUTH_SOCK"
			return c, nil
		}
		logger.Warn("the SSH agent does not answer; trying the default key files", "SSH_AUTH_SOCK", sock, "err", err)
	}
	home, _ := os.UserHomeDir()
	var signers []ssh.Signer
	var tried, problems []string
	for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		p := filepath.Join(home, ".ssh", name)
		tried = append(tried, p)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		s, err := readKey(p)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		signers = append(signers, s)
	}
	if len(signers) == 0 {
		msg := "no SSH key to log in with: SSH_AUTH_SOCK is not set and none of " + strings.Join(tried, ", ") + " is usable"
		if len(problems) > 0 {
			msg += " (" + strings.Join(problems, "; ") + ")"
		}
		return nil, errors.New(msg + ": start ssh-agent and ssh-add your key, or pass --runner-option identity=FILE")
	}
	c.auth = []ssh.AuthMethod{ssh.PublicKeys(signers...)}
	c.authFrom = "the keys in " + filepath.Join(home, ".ssh")
	return c, nil
}

// readKey reads a private key file without a passphrase.
func readKey(p string) (ssh.Signer, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading the SSH key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, fmt.Errorf("the SSH key %s has a passphrase, which MST does not ask for: add it to the agent (ssh-add %s) and leave out --runner-option identity", p, p)
	case err != nil:
		return nil, fmt.Errorf("the SSH key %s: %w", p, err)
	}
	return s, nil
}

// hostKeys checks host keys against a known_hosts file.
type hostKeys struct {
	file   string
	strict bool
	// check is nil when the file does not exist and checking is not
	// strict: every key is accepted.
	check ssh.HostKeyCallback
}

// loadHostKeys reads a known_hosts file. A missing file is an error when
// checking is strict.
func loadHostKeys(file string, strict bool) (*hostKeys, error) {
	h := &hostKeys{file: file, strict: strict}
	check, err := knownhosts.New(file)
	switch {
	case err == nil:
		h.check = check
	case errors.Is(err, os.ErrNotExist) && strict:
		return nil, fmt.Errorf("the known_hosts file %s does not exist: add each host's key to it with ssh-keyscan (ssh-keyscan -p PORT HOST >> %s, after checking the fingerprint), or name another file with --runner-option knownHosts=FILE", file, file)
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("reading the known_hosts file: %w", err)
	}
	return h, nil
}

// callback returns the host key callback for one login to t. An error it
// returns is stored in *refused, so the dialler can report it without the
// handshake's wrapping.
func (h *hostKeys) callback(t target, refused *error) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if h.check == nil {
			return nil
		}
		err := h.check(hostname, remote, key)
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ke) && len(ke.Want) == 0 && !h.strict:
			return nil
		case errors.As(err, &ke) && len(ke.Want) == 0:
			err = fmt.Errorf("the host key of %s (%s %s) is not in %s: if that is the host's key, add it with `%s >> %s` (or log in once with ssh), or name another file with --runner-option knownHosts=FILE",
				t.Addr(), key.Type(), ssh.FingerprintSHA256(key), h.file, keyscan(t), h.file)
		case errors.As(err, &ke):
			w := ke.Want[0]
			err = fmt.Errorf("the host key of %s changed: it is now %s %s, but %s:%d holds another key for it. If the host was rebuilt, remove the old key with `ssh-keygen -R '%s' -f %s` and add the new one with `%s >> %s`; otherwise someone may be intercepting the connection",
				t.Addr(), key.Type(), ssh.FingerprintSHA256(key), w.Filename, w.Line, knownhosts.Normalize(t.Addr()), h.file, keyscan(t), h.file)
		case errors.As(err, &re):
			err = fmt.Errorf("the host key of %s is revoked in %s:%d", t.Addr(), re.Revoked.Filename, re.Revoked.Line)
		default:
			err = fmt.Errorf("checking the host key of %s against %s: %w", t.Addr(), h.file, err)
		}
		*refused = err
		return err
	}
}

// keyscan is the command that prints t's host keys in known_hosts form.
func keyscan(t target) string {
	if t.Port == "22" {
		return "ssh-keyscan " + t.Host
	}
	return "ssh-keyscan -p " + t.Port + " " + t.Host
}

var (
	probeKeyOnce sync.Once
	probeKey     ssh.PublicKey
)

// algorithms lists the host key algorithms to offer t, so the server
// proves the key known_hosts has rather than another of its keys: the
// known keys are those the callback names when shown a key nobody has.
// It returns nil (the library's choice) when no key is known.
func (h *hostKeys) algorithms(t target) []string {
	if h.check == nil {
		return nil
	}
	probeKeyOnce.Do(func() {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		probeKey, _ = ssh.NewPublicKey(pub)
	})
	var ke *knownhosts.KeyError
	if err := h.check(t.Addr(), &net.TCPAddr{IP: net.ParseIP(t.Host)}, probeKey); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		names := []string{k.Key.Type()}
		if k.Key.Type() == ssh.KeyAlgoRSA {
			names = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				algos = append(algos, n)
			}
		}
	}
	return algos
}
