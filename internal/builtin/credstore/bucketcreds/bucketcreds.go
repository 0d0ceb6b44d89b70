// Package bucketcreds is the shared credential store: connector servers'
// grants kept encrypted in a gs:// or s3:// bucket (by default the run's
// results store), so that the coordinator of a detached run, on another
// machine, refreshes the same grants `mst auth` stored on this one.
//
// Under the store's URL it keeps:
//
//	grants/HASH.grant   each grant, sealed as the local store seals its files
//	                    (AES-256-GCM, authenticated with the object's name)
//	key.check           a known text sealed with the key, written with the
//	                    first grant, to tell a wrong key from a damaged grant
//	locks/HASH/N.json   the lock on a grant: a lease, as a run's lock is
//
// HASH is the hex SHA-256 of the server's name. The key is 32 random bytes
// in the secret credstore.KeySecret of the secrets file, never in the
// bucket: reading the bucket gives ciphertext only. The process that opens
// the store reads the key; MST keeps it from clients and workers.
//
// WithLock holds across machines: a lease taken by a conditional write
// (the object N+1 written only if it is not there), renewed while the
// refresh runs, let go at its end, and taken over a lease after a holder
// that died. A holder stalled longer than a lease (a laptop asleep) may
// find its lock taken when it wakes; its Put still lands, as the run's
// lock allows.
package bucketcreds

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Name is the store's name (--store bucket).
const Name = "bucket"

// OptionURL is the option naming where the grants are kept.
const OptionURL = "url"

// DefaultFolder is where in the results store the grants are kept when
// the url option is not given.
const DefaultFolder = ".mst-credentials"

const (
	grantsDir  = "grants/"
	locksDir   = "locks/"
	checkName  = "key.check"
	checkText  = "MST credential store key check"
	maxObject  = 1 << 20
	lockPollLo = 100 * time.Millisecond
	lockPollHi = 2 * time.Second
)

// Definition is the shared store's definition.
func Definition() *credstore.Definition {
	return &credstore.Definition{
		Name:        Name,
		Description: "grants encrypted in a gs:// or s3:// bucket (default: the results store, under " + DefaultFolder + "), the key in the secrets file as " + credstore.KeySecret + "; shared with detached runs' coordinators",
		Shared:      true,
		Create: func(ctx context.Context, p credstore.Params) (credstore.Store, error) {
			if err := p.CheckOptions(Name, OptionURL); err != nil {
				return nil, err
			}
			raw, err := Location(p.Options[OptionURL], p.Results)
			if err != nil {
				return nil, &credstore.OptionError{Err: err}
			}
			key, ok := p.SecretValue(credstore.KeySecret)
			if !ok {
				return nil, fmt.Errorf("the %s credential store encrypts the grants with the key %s from the secrets file, and %s: make a key with `mst auth new-key >> FILE` (once; keep FILE), then give --secrets-file FILE to mst auth and mst run", Name, credstore.KeySecret, noKey(p))
			}
			aead, err := credstore.ParseKey(key)
			if err != nil {
				return nil, err
			}
			st, err := Open(ctx, raw, aead)
			if err != nil {
				return nil, err
			}
			st.Waiting = p.LockWaiting
			return st, nil
		},
	}
}

func noKey(p credstore.Params) string {
	if p.Secret == nil {
		return "no --secrets-file was given"
	}
	return "the secrets file holds no " + credstore.KeySecret
}

// Location is the URL the store keeps its grants at: option when it is
// given, else results's DefaultFolder when results is in a bucket.
func Location(option, results string) (string, error) {
	if option != "" {
		if !strings.HasPrefix(option, "gs://") && !strings.HasPrefix(option, "s3://") {
			return "", fmt.Errorf("the %s credential store's url %q is not a bucket: give url=gs://BUCKET/PREFIX or url=s3://BUCKET/PREFIX", Name, option)
		}
		return option, nil
	}
	if strings.HasPrefix(results, "gs://") || strings.HasPrefix(results, "s3://") {
		u, err := url.Parse(results)
		if err != nil {
			return "", fmt.Errorf("the results store %q: %w", results, err)
		}
		u.Path = "/" + path.Join(strings.Trim(u.Path, "/"), DefaultFolder)
		u.RawPath = ""
		return u.String(), nil
	}
	return "", fmt.Errorf("the %s credential store keeps the grants in a bucket: give --store-option url=gs://BUCKET/PREFIX (or s3://), or keep the results in a bucket (--results or results.store in the eval config) and the grants go under its %s/", Name, DefaultFolder)
}

// Store is the shared store at one URL.
type Store struct {
	s    *blobstore.Store
	aead cipher.AEAD
	// Waiting, when set, is called when WithLock has to wait
	// (credstore.Params.LockWaiting).
	Waiting func(server string)
	// checkOK is set once the key is known to be the store's.
	mu      sync.Mutex
	checkOK bool
}

// Open opens the store at raw (gs://BUCKET/PREFIX or s3://…) with the key
// of aead. It reaches the bucket within blobstore's bound for opening,
// with the options blobstore.OptionsFrom(ctx) gives.
func Open(ctx context.Context, raw string, aead cipher.AEAD) (*Store, error) {
	u, err := blobstore.Parse(raw)
	if err != nil {
		return nil, err
	}
	s, err := blobstore.Open(ctx, u, blobstore.OptionsFrom(ctx))
	if err != nil {
		return nil, err
	}
	return &Store{s: s, aead: aead}, nil
}

// Location is the store's URL.
func (st *Store) Location() string { return st.s.Location() }

func (st *Store) key(rel string) string { return st.s.Prefix() + rel }

func (st *Store) urlOf(rel string) string { return st.s.URLOf(st.key(rel)) }

func grantRel(server string) string { return grantsDir + credstore.GrantObject(server) }

func (st *Store) notFound(server string) error {
	return fmt.Errorf("no grant for server %q in %s (authorise it with `mst auth %s --store %s`): %w", server, st.Location(), server, Name, credstore.ErrNotFound)
}

// wrongKey says the key is not the one the store's grants were sealed
// with.
func (st *Store) wrongKey() error {
	return fmt.Errorf("the key %s in the secrets file is not the key the grants in %s were stored with: give the secrets file that mst auth used, or, to start again, remove %s and authorise each server again", credstore.KeySecret, st.Location(), st.Location())
}

// checkKey reads key.check: ok when it opens with the key or is not
// there yet.
func (st *Store) checkKey(ctx context.Context) (bool, error) {
	b, err := st.s.ReadObject(ctx, st.key(checkName), maxObject)
	if blobstore.NotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	_, why := credstore.Unseal(st.aead, credstore.GrantObject(checkText), b)
	return why == "", nil
}

// ensureCheck writes key.check if it is not there, and refuses a key that
// is not the one it was written with, so grants are never stored under
// two keys.
func (st *Store) ensureCheck(ctx context.Context) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.checkOK {
		return nil
	}
	ok, err := st.checkKey(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return st.wrongKey()
	}
	sealed, err := credstore.Seal(st.aead, credstore.GrantObject(checkText), credstore.Grant{Server: checkText})
	if err != nil {
		return err
	}
	err = st.s.WriteObject(ctx, st.key(checkName), sealed, &blob.WriterOptions{IfNotExist: true, ContentType: "application/octet-stream"})
	if blobstore.AlreadyThere(err) {
		// Another wrote it first: it must open with this key.
		if ok, err = st.checkKey(ctx); err == nil && !ok {
			err = st.wrongKey()
		}
	}
	if err != nil {
		return err
	}
	st.checkOK = true
	return nil
}

// open unseals b, read from rel; server is the server looked for ("" in
// a listing).
func (st *Store) open(ctx context.Context, rel, server string, b []byte) (credstore.Grant, error) {
	g, why := credstore.Unseal(st.aead, path.Base(rel), b)
	if why == "" {
		return g, nil
	}
	if ok, err := st.checkKey(ctx); err == nil && !ok {
		return g, st.wrongKey()
	}
	return g, &credstore.DamagedError{File: st.urlOf(rel), Server: server, Why: why}
}

// Get returns server's grant.
func (st *Store) Get(ctx context.Context, server string) (credstore.Grant, error) {
	if err := credstore.CheckServer(server); err != nil {
		return credstore.Grant{}, err
	}
	rel := grantRel(server)
	b, err := st.s.ReadObject(ctx, st.key(rel), maxObject)
	if blobstore.NotFound(err) {
		return credstore.Grant{}, st.notFound(server)
	}
	if err != nil {
		return credstore.Grant{}, fmt.Errorf("reading the grant for server %q: %w", server, err)
	}
	if len(b) > maxObject {
		return credstore.Grant{}, &credstore.DamagedError{File: st.urlOf(rel), Server: server, Why: "is larger than any grant"}
	}
	return st.open(ctx, rel, server, b)
}

// Put stores g, replacing any grant of its server whole: a bucket's
// object is replaced at once.
func (st *Store) Put(ctx context.Context, g credstore.Grant) error {
	if err := g.Check(); err != nil {
		return err
	}
	if err := st.ensureCheck(ctx); err != nil {
		return err
	}
	rel := grantRel(g.Server)
	sealed, err := credstore.Seal(st.aead, path.Base(rel), g)
	if err != nil {
		return err
	}
	if err := st.s.WriteObject(ctx, st.key(rel), sealed, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("storing the grant for server %q: %w", g.Server, err)
	}
	return nil
}

// Delete removes server's grant.
func (st *Store) Delete(ctx context.Context, server string) error {
	if err := credstore.CheckServer(server); err != nil {
		return err
	}
	err := st.s.DeleteObject(ctx, st.key(grantRel(server)))
	if blobstore.NotFound(err) {
		return st.notFound(server)
	}
	if err != nil {
		return fmt.Errorf("removing the grant for server %q: %w", server, err)
	}
	return nil
}

// List returns every grant as a listing shows it.
func (st *Store) List(ctx context.Context) ([]credstore.Grant, error) {
	var rels []string
	err := st.s.ListObjects(ctx, &blob.ListOptions{Prefix: st.key(grantsDir)}, func(o *blob.ListObject) error {
		if rel := strings.TrimPrefix(o.Key, st.s.Prefix()); !o.IsDir && strings.HasSuffix(rel, ".grant") {
			rels = append(rels, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the grants in %s: %w", st.Location(), err)
	}
	out := []credstore.Grant{}
	var errs []error
	for _, rel := range rels {
		b, err := st.s.ReadObject(ctx, st.key(rel), maxObject)
		if blobstore.NotFound(err) {
			continue // removed since the listing
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", st.urlOf(rel), err))
			continue
		}
		g, err := st.open(ctx, rel, "", b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, g.Listing())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out, errors.Join(errs...)
}

// heldKey marks, in the ctx WithLock gives fn, the lock it holds.
type heldKey struct{ lock string }

// WithLock holds server's lock, across machines, while fn runs.
func (st *Store) WithLock(ctx context.Context, server string, fn func(ctx context.Context) error) error {
	if err := credstore.CheckServer(server); err != nil {
		return err
	}
	dir := st.key(locksDir + credstore.GrantObject(server))
	id := st.s.URLOf(dir)
	key := heldKey{id}
	if held, ok := ctx.Value(key).(*atomic.Bool); ok && held.Load() {
		return fn(ctx)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	waited := false
	wait := func() {
		if !waited {
			waited = true
			if st.Waiting != nil {
				st.Waiting(server)
			}
		}
	}
	// Goroutines of this process wait on a channel, not by polling the
	// bucket.
	unlock, err := credstore.LockInProcess(ctx, id, server, wait)
	if err != nil {
		return err
	}
	defer unlock()
	what := fmt.Sprintf("the lock on server %q's grant", server)
	owner := transcript.Owner{PID: os.Getpid(), Host: hostname(), Started: time.Now().UTC()}
	poll := lockPollLo
	var release func() error
	for {
		var err error
		release, err = st.s.Lease(ctx, dir, what, owner)
		if err == nil {
			break
		}
		var busy *store.BusyError
		if !errors.As(err, &busy) {
			return fmt.Errorf("locking server %q's grant: %w", server, err)
		}
		wait()
		t := time.NewTimer(poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the lock on server %q's grant (held by %s): %w", server, busy.Owner, ctx.Err())
		}
		poll = min(2*poll, lockPollHi)
	}
	held := new(atomic.Bool)
	held.Store(true)
	defer func() {
		held.Store(false)
		release() // a failed release lets the lock go a lease later
	}()
	return fn(context.WithValue(ctx, key, held))
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
