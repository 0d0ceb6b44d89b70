package bucketcreds_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/credstore/credstoretest"
	"github.com/mst-eval/mst/internal/builtin/credstore/bucketcreds"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/store"
)

// The suite's stores live under the URL in baseEnv, a prefix per folder,
// with the key in keyEnv: set by the test, inherited by the suite's
// helper processes.
const (
	baseEnv = "MST_BUCKETCREDS_TEST_BASE"
	keyEnv  = "MST_BUCKETCREDS_TEST_KEY"
)

func TestMain(m *testing.M) {
	credstoretest.Helper(openAt)
	os.Exit(m.Run())
}

// openAt is the store of the folder dir: a prefix named after it under
// baseEnv's URL.
func openAt(dir string, waiting func(string)) (credstore.Store, error) {
	sum := sha256.Sum256([]byte(dir))
	return bucketcreds.Definition().Create(context.Background(), credstore.Params{
		Options:     map[string]string{bucketcreds.OptionURL: withPath(os.Getenv(baseEnv), hex.EncodeToString(sum[:8]))},
		Secret:      func(name string) (string, bool) { return os.Getenv(keyEnv), name == credstore.KeySecret },
		LockWaiting: waiting,
	})
}

func open(ctx context.Context, raw, key string) (*bucketcreds.Store, error) {
	aead, err := credstore.ParseKey(key)
	if err != nil {
		return nil, err
	}
	return bucketcreds.Open(ctx, raw, aead)
}

// withPath adds elem to the path of the URL raw, keeping its query.
func withPath(raw, elem string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + elem
	return u.String()
}

// emulator is one cloud's emulator with a fresh bucket: base is the
// store URL of the bucket, bucket the bucket opened directly.
type emulator struct {
	base   string
	bucket *blob.Bucket
}

func gcs(t *testing.T) emulator {
	g := blobtest.StartGCS(t)
	name := g.NewBucket(t)
	blobtest.Setenv(t, g.Env())
	return emulator{base: "gs://" + name, bucket: g.OpenBucket(t, name)}
}

func s3(t *testing.T) emulator {
	s := blobtest.StartS3(t)
	name := s.NewBucket(t)
	blobtest.Setenv(t, s.Env(t))
	return emulator{base: s.StoreURL(name, "creds"), bucket: s.OpenBucket(t, name)}
}

var clouds = []struct {
	name  string
	start func(t *testing.T) emulator
}{{"gcs", gcs}, {"s3", s3}}

// TestConformance runs the credential store suite on both emulators; its
// cross-process checks lock from helper processes on the same bucket.
func TestConformance(t *testing.T) {
	for _, c := range clouds {
		t.Run(c.name, func(t *testing.T) {
			e := c.start(t)
			t.Setenv(baseEnv, e.base)
			t.Setenv(keyEnv, credstore.NewKey())
			credstoretest.Run(t, openAt)
		})
	}
}

// TestNoClearText: what the bucket holds shows none of a grant's values,
// and the key is nowhere in it.
func TestNoClearText(t *testing.T) {
	for _, c := range clouds {
		t.Run(c.name, func(t *testing.T) {
			e := c.start(t)
			key := credstore.NewKey()
			st, err := open(t.Context(), withPath(e.base, "x"), key)
			if err != nil {
				t.Fatal(err)
			}
			g := credstoretest.NewGrant("über/notes")
			if err := st.Put(t.Context(), g); err != nil {
				t.Fatal(err)
			}
			n := 0
			it := e.bucket.List(nil)
			for {
				o, err := it.Next(t.Context())
				if err != nil {
					break
				}
				n++
				b, err := e.bucket.ReadAll(t.Context(), o.Key)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range append(credstoretest.Secrets(g), key, g.Server, g.Resource, g.ClientID) {
					if bytes.Contains(b, []byte(v)) {
						t.Errorf("%s holds %q in clear", o.Key, v)
					}
				}
				if strings.Contains(o.Key, "notes") {
					t.Errorf("object name %s shows the server's name", o.Key)
				}
			}
			if n < 2 {
				t.Errorf("the bucket holds %d objects, want the grant and the key check", n)
			}
		})
	}
}

// TestWrongKey: a store opened with another key than its grants' says
// so, for Get, List and Put, and never overwrites a grant with the wrong
// key.
func TestWrongKey(t *testing.T) {
	e := gcs(t)
	raw := withPath(e.base, "team")
	right, err := open(t.Context(), raw, credstore.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	g := credstoretest.NewGrant("notes")
	if err := right.Put(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	wrong, err := open(t.Context(), raw, credstore.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "is not the key the grants in "+raw) || !strings.Contains(err.Error(), credstore.KeySecret) {
			t.Errorf("%s with the wrong key: %v; want it to say the key is not the grants' key", what, err)
		}
	}
	_, err = wrong.Get(t.Context(), "notes")
	check("Get", err)
	_, err = wrong.List(t.Context())
	check("List", err)
	check("Put", wrong.Put(t.Context(), credstoretest.NewGrant("notes")))
	got, err := right.Get(t.Context(), "notes")
	if err != nil {
		t.Fatalf("the right key after the wrong one's Put: %v", err)
	}
	if d := credstoretest.Diff(got, g); d != "" {
		t.Errorf("the grant changed: %s", d)
	}
}

// TestDefinition: the store's options and key come from the flags and the
// secrets file, with errors that say what to give.
func TestDefinition(t *testing.T) {
	e := gcs(t)
	def := bucketcreds.Definition()
	if !def.Shared {
		t.Error("the bucket store is not marked shared")
	}
	key := credstore.NewKey()
	secret := func(v string) func(string) (string, bool) {
		return func(name string) (string, bool) { return v, name == credstore.KeySecret && v != "" }
	}
	for _, tc := range []struct {
		name string
		p    credstore.Params
		want string
	}{
		{"no secrets file", credstore.Params{Options: map[string]string{"url": e.base}}, "no --secrets-file was given"},
		{"no key", credstore.Params{Options: map[string]string{"url": e.base}, Secret: secret("")}, "the secrets file holds no MST_CREDENTIALS_KEY"},
		{"bad key", credstore.Params{Options: map[string]string{"url": e.base}, Secret: secret("short-and-wrong")}, "mst auth new-key"},
		{"no url", credstore.Params{Secret: secret(key), Results: "/tmp/results"}, "give --store-option url=gs://BUCKET/PREFIX"},
		{"not a bucket", credstore.Params{Options: map[string]string{"url": "/tmp/x"}, Secret: secret(key)}, "is not a bucket"},
		{"unknown option", credstore.Params{Options: map[string]string{"dir": "x"}, Secret: secret(key)}, `no option "dir"`},
	} {
		_, err := def.Create(t.Context(), tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("%s: the error shows the key", tc.name)
		}
	}
	// By default the grants go under the results store.
	st, err := def.Create(t.Context(), credstore.Params{Secret: secret(key), Results: e.base + "/team"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.(*bucketcreds.Store).Location(), e.base+"/team/"+bucketcreds.DefaultFolder; got != want {
		t.Errorf("the store is at %s, want %s", got, want)
	}
	if err := st.Put(t.Context(), credstoretest.NewGrant("notes")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bucket.Attributes(t.Context(), "team/"+bucketcreds.DefaultFolder+"/key.check"); err != nil {
		t.Errorf("no key check under the results store: %v", err)
	}
	// A bucket that is not there is refused when the store opens.
	_, err = def.Create(t.Context(), credstore.Params{Options: map[string]string{"url": "gs://no-such-bucket-mst/x"}, Secret: secret(key)})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a missing bucket: %v", err)
	}
	if errors.Is(err, credstore.ErrNotFound) {
		t.Error("a missing bucket reads as a missing grant")
	}
}

// TestFaults: a bucket that refuses, never answers, answers 503 or cuts
// its answers fails each of Get, Put, List and WithLock within the
// store's bounds, saying the store is not answering; nothing waits for
// ever, and a Ctrl-C (ctx) ends a wait for a lock at once.
func TestFaults(t *testing.T) {
	g := blobtest.StartGCS(t)
	name := g.NewBucket(t)
	p, host := blobtest.StartFaultProxy(t, g.Host())
	t.Setenv("STORAGE_EMULATOR_HOST", host)
	ctx := blobstore.WithOptions(t.Context(), blobstore.Options{Limits: blobstore.Limits{Call: time.Second, Try: 300 * time.Millisecond, Backoff: 30 * time.Millisecond}})
	st, err := open(ctx, "gs://"+name+"/faults", credstore.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, credstoretest.NewGrant("notes")); err != nil {
		t.Fatal(err)
	}
	const bound = 5 * time.Second // a call's second, with room for a loaded machine
	for _, f := range []blobtest.Fault{blobtest.Refuse, blobtest.Hang, blobtest.Status(503), blobtest.Cut} {
		p.Set(f, nil)
		for what, call := range map[string]func(context.Context) error{
			"Get":  func(ctx context.Context) error { _, err := st.Get(ctx, "notes"); return err },
			"Put":  func(ctx context.Context) error { return st.Put(ctx, credstoretest.NewGrant("notes")) },
			"List": func(ctx context.Context) error { _, err := st.List(ctx); return err },
			"WithLock": func(ctx context.Context) error {
				return st.WithLock(ctx, "notes", func(context.Context) error { return nil })
			},
		} {
			start := time.Now()
			err := call(ctx)
			took := time.Since(start)
			if err == nil || !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s under %s: %v, want the store not answering", what, f, err)
			}
			if errors.Is(err, credstore.ErrNotFound) {
				t.Errorf("%s under %s reads as a missing grant", what, f)
			}
			if took > bound {
				t.Errorf("%s under %s took %s, want less than %s", what, f, took, bound)
			}
		}
	}
	p.Set(blobtest.Pass, nil)
	if _, err := st.Get(ctx, "notes"); err != nil {
		t.Errorf("Get once the bucket answers again: %v", err)
	}
}
