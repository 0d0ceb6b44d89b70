package credstore

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
)

// LocalName is the name of the built-in store, the default.
const LocalName = "local"

// Local store options (Params.Options).
const (
	// OptionDir is the folder of the grants.
	OptionDir = "dir"
	// OptionKeyFile is the key file.
	OptionKeyFile = "key-file"
)

// LocalDefinition is the built-in store: OpenLocal with the dir and
// key-file options ("" or absent for the defaults).
func LocalDefinition() *Definition {
	return &Definition{
		Name:        LocalName,
		Description: "grants encrypted at rest in a folder of this machine (default ~/.config/mst/credentials)",
		Shared:      false,
		Create: func(ctx context.Context, p Params) (Store, error) {
			if err := p.CheckOptions(LocalName, OptionDir, OptionKeyFile); err != nil {
				return nil, err
			}
			l, err := OpenLocal(p.Options[OptionDir], p.Options[OptionKeyFile])
			if err != nil {
				return nil, err
			}
			l.Waiting = p.LockWaiting
			return l, nil
		},
	}
}

// Local is the built-in store: one file per grant in a folder of this
// machine, encrypted with AES-256-GCM under a random key kept in a
// separate key file.
//
// What it protects against: other users of the machine (the folder is
// mode 0700, every file in it and the key file 0600); a copy of the
// folder without the key file (a folder synced or committed with the
// user's dotfiles, sent along with a bug report); a backup that holds one
// of the two but not the other. By default the key file is outside the
// configuration folder, in $XDG_DATA_HOME/mst (~/.local/share/mst), so
// copying ~/.config alone copies only ciphertext. Each file is
// authenticated with its name, so a file that was altered, or moved to
// another server's name, is refused rather than used.
//
// What it does not protect against: anything that runs as the same user
// on this machine (it can read the key file as MST does), root, and a
// copy or backup that holds both the folder and the key file. The file
// names are hashes of the server names, so someone who can list the
// folder can tell whether a server they can name has a grant.
//
// The lock of WithLock is flock(2) on a file per server in the folder,
// with an in-process lock in front of it; the operating system drops it
// when a process ends, however it ends.
type Local struct {
	dir, keyFile string
	// Waiting, when set, is called when WithLock has to wait
	// (Params.LockWaiting).
	Waiting func(server string)
}

// DefaultLocalDir is $XDG_CONFIG_HOME/mst/credentials, or
// ~/.config/mst/credentials when XDG_CONFIG_HOME is unset or relative.
func DefaultLocalDir() (string, error) {
	base, err := xdgDir("XDG_CONFIG_HOME", ".config")
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "mst", "credentials"), nil
}

// DefaultLocalKeyFile is $XDG_DATA_HOME/mst/credentials.key, or
// ~/.local/share/mst/credentials.key when XDG_DATA_HOME is unset or
// relative.
func DefaultLocalKeyFile() (string, error) {
	base, err := xdgDir("XDG_DATA_HOME", filepath.Join(".local", "share"))
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "mst", "credentials.key"), nil
}

func xdgDir(env, underHome string) (string, error) {
	if d := os.Getenv(env); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the folder for credentials: %w; set %s, or the local store's %s and %s options", err, env, OptionDir, OptionKeyFile)
	}
	return filepath.Join(home, underHome), nil
}

// OpenLocal returns the local store over the folder dir with the key in
// keyFile. dir "" is DefaultLocalDir. keyFile "" is DefaultLocalKeyFile
// when dir is the default too, and dir+".key" (beside the folder, not in
// it) when dir was given. Nothing is made on disk until the first Put or
// WithLock: the folder (mode 0700, its missing parents too), then the key
// file (0600) with a fresh random key.
func OpenLocal(dir, keyFile string) (*Local, error) {
	if err := lockSupported(); err != nil {
		return nil, err
	}
	var err error
	if dir == "" {
		if dir, err = DefaultLocalDir(); err != nil {
			return nil, err
		}
		if keyFile == "" {
			if keyFile, err = DefaultLocalKeyFile(); err != nil {
				return nil, err
			}
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if keyFile == "" {
		keyFile = dir + ".key"
	}
	if keyFile, err = filepath.Abs(keyFile); err != nil {
		return nil, err
	}
	if keyFile == dir || strings.HasPrefix(keyFile, dir+string(filepath.Separator)) {
		return nil, fmt.Errorf("the local credential store's key file %s is inside its folder %s; keep it outside, so a copy of the folder holds no key", keyFile, dir)
	}
	return &Local{dir: dir, keyFile: keyFile}, nil
}

// Dir is the store's folder.
func (s *Local) Dir() string { return s.dir }

// KeyFile is the store's key file.
func (s *Local) KeyFile() string { return s.keyFile }

const (
	// magic starts every grant file: the format and its version.
	magic      = "MSTCRED\x01"
	grantExt   = ".grant"
	lockExt    = ".lock"
	maxFile    = 1 << 20
	keyBytes   = 32
	nonceBytes = 12
)

// fileBase is the name, without extension, of server's files: the hex
// SHA-256 of its name, so any name makes a short, safe file name.
func fileBase(server string) string {
	sum := sha256.Sum256([]byte(server))
	return hex.EncodeToString(sum[:])
}

func (s *Local) grantPath(server string) string {
	return filepath.Join(s.dir, fileBase(server)+grantExt)
}

// isGrantFile reports whether name is the name of a grant file.
func isGrantFile(name string) bool {
	base, ok := strings.CutSuffix(name, grantExt)
	if !ok || len(base) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(base)
	return err == nil && strings.ToLower(base) == base
}

// DamagedError is a grant file the store cannot read.
type DamagedError struct {
	// File is the file's path; Server the server whose grant was looked
	// for, or "" in a listing (the name is inside the file).
	File, Server string
	// Why says what is wrong with it.
	Why string
}

func (e *DamagedError) Error() string {
	if e.Server != "" {
		q := shellQuote(e.Server)
		return fmt.Sprintf("cannot read the grant for server %q: %s %s; run `mst auth revoke %s` and then `mst auth %s` to authorise it again", e.Server, e.File, e.Why, q, q)
	}
	return fmt.Sprintf("cannot read %s: it %s; remove it with `mst auth revoke SERVER` for the server it was for (or delete the file), then run `mst auth SERVER`", e.File, e.Why)
}

// errNoKey means the key file does not exist.
var errNoKey = errors.New("no key file")

// checkDir checks that the folder, if it exists, is a folder only its
// owner can enter. It reports whether it exists.
func (s *Local) checkDir() (bool, error) {
	st, err := os.Stat(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("opening the credentials folder: %w", err)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("the credentials folder %s is not a folder; move it away, or give the local store another folder (option %s)", s.dir, OptionDir)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return false, fmt.Errorf("the credentials folder %s has mode %04o, so other users can reach it; make it yours alone with `chmod 700 %s`", s.dir, perm, shellQuote(s.dir))
	}
	return true, nil
}

// ensureDir makes the folder, mode 0700, with its missing parents.
func (s *Local) ensureDir() error {
	if ok, err := s.checkDir(); ok || err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o700); err != nil {
		return fmt.Errorf("making the credentials folder: %w", err)
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("making the credentials folder: %w", err)
	} else if err == nil {
		// The umask may have taken bits away; the owner needs all three.
		if err := os.Chmod(s.dir, 0o700); err != nil {
			return fmt.Errorf("making the credentials folder: %w", err)
		}
		if err := syncDir(filepath.Dir(s.dir)); err != nil {
			return fmt.Errorf("making the credentials folder: %w", err)
		}
	}
	_, err := s.checkDir()
	return err
}

// grantFiles lists the names of the grant files in the folder.
func (s *Local) grantFiles() ([]string, error) {
	es, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the credentials folder: %w", err)
	}
	var names []string
	for _, e := range es {
		if isGrantFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// key returns the cipher of the key file. When the file does not exist,
// it fails with errNoKey, unless create is set: then it makes one, unless
// the folder holds grants, which a fresh key could never read.
func (s *Local) key(create bool) (cipher.AEAD, error) {
	data, err := s.readKey()
	if errors.Is(err, fs.ErrNotExist) {
		if !create {
			return nil, errNoKey
		}
		names, lerr := s.grantFiles()
		if lerr != nil {
			return nil, lerr
		}
		if len(names) > 0 {
			// Another process may have made the key and a grant
			// meanwhile.
			if data, err = s.readKey(); err == nil {
				return s.cipher(data)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			return nil, fmt.Errorf("the key file %s of the credentials folder %s is missing, and the %d grants in the folder cannot be read without it; put the key file back, or remove those grants (`mst auth revoke SERVER` for each, or delete the folder) and run `mst auth SERVER` again", s.keyFile, s.dir, len(names))
		}
		data, err = s.makeKey()
	}
	if err != nil {
		return nil, err
	}
	return s.cipher(data)
}

// cipher returns the cipher of the key file's content.
func (s *Local) cipher(data []byte) (cipher.AEAD, error) {
	raw, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(raw) != keyBytes {
		return nil, fmt.Errorf("the key file %s is damaged: it must hold %d hex digits and holds something else; put back a copy of it, or remove the grants it encrypts (`mst auth revoke SERVER` for each) and the key file, then run `mst auth SERVER` again", s.keyFile, 2*keyBytes)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// readKey reads the key file, refusing one that others may read.
func (s *Local) readKey() ([]byte, error) {
	f, err := os.Open(s.keyFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("reading the credentials key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the credentials key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the key file %s is not a file; move it away", s.keyFile)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the key file %s has mode %04o, so other users can read it; make it yours alone with `chmod 600 %s`", s.keyFile, perm, shellQuote(s.keyFile))
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("reading the credentials key: %w", err)
	}
	return data, nil
}

// makeKey writes a fresh random key to the key file, mode 0600, unless
// another process made one first; it returns the key file's content. The
// key goes to a temporary file that is then linked into place, so two
// first uses at once agree on one key.
func (s *Local) makeKey() ([]byte, error) {
	dir := filepath.Dir(s.keyFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the credentials key: %w", err)
	}
	raw := make([]byte, keyBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	content := []byte(hex.EncodeToString(raw) + "\n")
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(s.keyFile)+"-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("making the credentials key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(content)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("making the credentials key: %w", err)
	}
	if err := os.Link(tmp, s.keyFile); errors.Is(err, fs.ErrExist) {
		return s.readKey()
	} else if err != nil {
		return nil, fmt.Errorf("making the credentials key: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("making the credentials key: %w", err)
	}
	return content, nil
}

// aad is the data each file's encryption authenticates beside its
// content: the format and the file's name, so a file renamed to another
// server's name does not open.
func aad(fileName string) []byte { return []byte(magic + fileName) }

func seal(aead cipher.AEAD, fileName string, g Grant) ([]byte, error) {
	plain, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, nonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte(magic), nonce...)
	return aead.Seal(out, nonce, plain, aad(fileName)), nil
}

// unseal decrypts a grant file's content; why says what is wrong.
func unseal(aead cipher.AEAD, fileName string, data []byte) (g Grant, why string) {
	rest, ok := bytes.CutPrefix(data, []byte(magic))
	if !ok {
		return g, "is not an MST credential file"
	}
	if len(rest) < nonceBytes+aead.Overhead() {
		return g, "is cut short (damaged)"
	}
	plain, err := aead.Open(nil, rest[:nonceBytes], rest[nonceBytes:], aad(fileName))
	if err != nil {
		return g, "is damaged, or was encrypted with another key than this store's"
	}
	if err := json.Unmarshal(plain, &g); err != nil {
		return g, "holds no grant MST can read"
	}
	if fileBase(g.Server)+grantExt != fileName {
		return g, "holds the grant of another server"
	}
	return g, ""
}

// readFile reads a grant file: nil data when it does not exist.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading a grant: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading a grant: %w", err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

func (s *Local) notFound(server string) error {
	return fmt.Errorf("no grant for server %q in the credentials folder %s (authorise it with `mst auth %s`): %w", server, s.dir, shellQuote(server), ErrNotFound)
}

// Get returns server's grant.
func (s *Local) Get(ctx context.Context, server string) (Grant, error) {
	if err := CheckServer(server); err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	if ok, err := s.checkDir(); err != nil {
		return Grant{}, err
	} else if !ok {
		return Grant{}, s.notFound(server)
	}
	path := s.grantPath(server)
	data, err := readFile(path)
	if err != nil {
		return Grant{}, err
	}
	if data == nil {
		return Grant{}, s.notFound(server)
	}
	if len(data) > maxFile {
		return Grant{}, &DamagedError{File: path, Server: server, Why: "is too large to be a grant"}
	}
	aead, err := s.key(false)
	if errors.Is(err, errNoKey) {
		q := shellQuote(server)
		return Grant{}, fmt.Errorf("cannot read the grant for server %q in %s: the key file %s is missing; put it back, or run `mst auth revoke %s` and then `mst auth %s`", server, path, s.keyFile, q, q)
	}
	if err != nil {
		return Grant{}, err
	}
	g, why := unseal(aead, filepath.Base(path), data)
	if why != "" {
		return Grant{}, &DamagedError{File: path, Server: server, Why: why}
	}
	return g, nil
}

// Put stores g, replacing the file whole (a temporary file, synced, then
// renamed into place).
func (s *Local) Put(ctx context.Context, g Grant) error {
	if err := g.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.ensureDir(); err != nil {
		return err
	}
	aead, err := s.key(true)
	if err != nil {
		return err
	}
	path := s.grantPath(g.Server)
	data, err := seal(aead, filepath.Base(path), g)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFrom(path, bytes.NewReader(data), 0o600); err != nil {
		return fmt.Errorf("storing the grant for server %q: %w", g.Server, err)
	}
	return nil
}

// Delete removes server's grant file. It needs no key, so a grant that
// can no longer be read can still be removed.
func (s *Local) Delete(ctx context.Context, server string) error {
	if err := CheckServer(server); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.checkDir(); err != nil {
		return err
	}
	err := os.Remove(s.grantPath(server))
	if errors.Is(err, fs.ErrNotExist) {
		return s.notFound(server)
	}
	if err != nil {
		return fmt.Errorf("removing the grant for server %q: %w", server, err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("removing the grant for server %q: %w", server, err)
	}
	return nil
}

// List returns the grants without their secrets. Files in the folder that
// are not grant files by name (temporary files, locks, anything else) are
// passed over.
func (s *Local) List(ctx context.Context) ([]Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := s.checkDir(); err != nil {
		return nil, err
	}
	names, err := s.grantFiles()
	if err != nil || len(names) == 0 {
		return nil, err
	}
	aead, err := s.key(false)
	if errors.Is(err, errNoKey) {
		return nil, fmt.Errorf("cannot read the %d grants in the credentials folder %s: the key file %s is missing; put it back, or remove them (`mst auth revoke SERVER` for each, or delete the folder) and run `mst auth SERVER` again", len(names), s.dir, s.keyFile)
	}
	if err != nil {
		return nil, err
	}
	var out []Grant
	var errs []error
	for _, name := range names {
		path := filepath.Join(s.dir, name)
		data, err := readFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if data == nil {
			continue // deleted meanwhile
		}
		if len(data) > maxFile {
			errs = append(errs, &DamagedError{File: path, Why: "is too large to be a grant"})
			continue
		}
		g, why := unseal(aead, name, data)
		if why != "" {
			errs = append(errs, &DamagedError{File: path, Why: why})
			continue
		}
		out = append(out, g.Listing())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out, errors.Join(errs...)
}

// WithLock holds server's lock while fn runs.
func (s *Local) WithLock(ctx context.Context, server string, fn func(ctx context.Context) error) error {
	if err := CheckServer(server); err != nil {
		return err
	}
	path := filepath.Join(s.dir, fileBase(server)+lockExt)
	key := heldKey{path}
	if held, ok := ctx.Value(key).(*atomic.Bool); ok && held.Load() {
		return fn(ctx)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.ensureDir(); err != nil {
		return err
	}
	waited := false
	wait := func() {
		if !waited {
			waited = true
			if s.Waiting != nil {
				s.Waiting(server)
			}
		}
	}
	release, err := LockInProcess(ctx, path, server, wait)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		release()
		return fmt.Errorf("locking server %q's grant: %w", server, err)
	}
	got, err := tryLock(f)
	if err == nil && !got {
		wait()
		done := make(chan error, 1)
		go func() { done <- lock(f) }()
		select {
		case err = <-done:
		case <-ctx.Done():
			// The lock may still come; let it go then.
			go func() {
				if <-done == nil {
					unlock(f)
				}
				f.Close()
				release()
			}()
			return fmt.Errorf("waiting for the lock on server %q's grant: %w", server, ctx.Err())
		}
	}
	if err != nil {
		f.Close()
		release()
		return fmt.Errorf("locking server %q's grant: %w", server, err)
	}
	held := new(atomic.Bool)
	held.Store(true)
	defer func() {
		held.Store(false)
		unlock(f)
		f.Close()
		release()
	}()
	return fn(context.WithValue(ctx, key, held))
}

// heldKey marks, in the ctx WithLock gives fn, the lock file it holds.
type heldKey struct{ path string }

// LockInProcess takes the in-process lock named key (a store's lock
// file, or its lock's URL) for server's grant, held while a goroutine of
// this process holds the store's own lock or waits for it: goroutines
// wait here instead of each in the store's lock (a flock call, polling a
// bucket). It calls wait before it waits, and gives up when ctx ends.
// release lets the lock go.
func LockInProcess(ctx context.Context, key, server string, wait func()) (release func(), err error) {
	pl := processLock(key)
	select {
	case pl <- struct{}{}:
	default:
		wait()
		select {
		case pl <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the lock on server %q's grant: %w", server, ctx.Err())
		}
	}
	return func() { <-pl }, nil
}

// processLock returns the in-process lock named key: a channel of one
// slot, full while it is held. Entries are never removed; there is one
// per server used.
func processLock(key string) chan struct{} {
	procLocks.Lock()
	defer procLocks.Unlock()
	if procLocks.m == nil {
		procLocks.m = map[string]chan struct{}{}
	}
	ch := procLocks.m[key]
	if ch == nil {
		ch = make(chan struct{}, 1)
		procLocks.m[key] = ch
	}
	return ch
}

var procLocks struct {
	sync.Mutex
	m map[string]chan struct{}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
