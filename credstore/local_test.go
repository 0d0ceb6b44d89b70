package credstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/credstore/credstoretest"
)

func TestMain(m *testing.M) {
	credstoretest.Helper(openLocal)
	os.Exit(m.Run())
}

// openLocal is the local store over dir/credentials, its key in
// dir/credentials.key, opened as mst opens it.
func openLocal(dir string, waiting func(string)) (credstore.Store, error) {
	return credstore.LocalDefinition().Create(context.Background(), credstore.Params{
		Options:     map[string]string{credstore.OptionDir: filepath.Join(dir, "credentials")},
		LockWaiting: waiting,
	})
}

func newLocal(t *testing.T) *credstore.Local {
	t.Helper()
	s, err := credstore.OpenLocal(filepath.Join(t.TempDir(), "credentials"), "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocalConformance(t *testing.T) {
	credstoretest.Run(t, openLocal)
}

func TestRegistry(t *testing.T) {
	reg := credstore.NewRegistry(credstore.LocalDefinition())
	d, err := reg.Lookup("local")
	if err != nil || d.Shared {
		t.Errorf("Lookup(local) = %+v, %v; want the local store, not shared", d, err)
	}
	_, err = reg.Lookup("lokal")
	if want := `unknown credential store "lokal" (known: local)`; err == nil || err.Error() != want {
		t.Errorf("Lookup(lokal) = %v, want %q", err, want)
	}
	dir := filepath.Join(t.TempDir(), "c")
	s, err := d.Create(t.Context(), credstore.Params{Options: map[string]string{"dir": dir}})
	if err != nil {
		t.Fatal(err)
	}
	if l := s.(*credstore.Local); l.Dir() != dir || l.KeyFile() != dir+".key" {
		t.Errorf("Create(dir=%s) = folder %s, key %s; want the key file beside the folder", dir, l.Dir(), l.KeyFile())
	}
	_, err = d.Create(t.Context(), credstore.Params{Options: map[string]string{"dir": dir, "folder": "x"}})
	if err == nil || !strings.Contains(err.Error(), `"folder"`) || !strings.Contains(err.Error(), "dir, key-file") {
		t.Errorf("Create with an unknown option = %v; want it named with the known ones", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewRegistry with a name twice did not panic")
		}
	}()
	credstore.NewRegistry(credstore.LocalDefinition(), credstore.LocalDefinition())
}

func TestLocalDefaults(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("XDG_DATA_HOME", "relative/is/ignored")
	s, err := credstore.OpenLocal("", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, ".config/mst/credentials"); s.Dir() != want {
		t.Errorf("default folder = %s, want %s", s.Dir(), want)
	}
	if want := filepath.Join(home, ".local/share/mst/credentials.key"); s.KeyFile() != want {
		t.Errorf("default key file = %s, want %s", s.KeyFile(), want)
	}
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(xdg, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(xdg, "data"))
	s, err = credstore.OpenLocal("", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir() != filepath.Join(xdg, "config/mst/credentials") || s.KeyFile() != filepath.Join(xdg, "data/mst/credentials.key") {
		t.Errorf("with XDG folders set: folder %s, key %s", s.Dir(), s.KeyFile())
	}
	// Opening makes nothing; the first Put makes the folder and the key.
	if _, err := os.Stat(filepath.Join(xdg, "config")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenLocal made something on disk: %v", err)
	}
	if err := s.Put(t.Context(), credstoretest.NewGrant("x")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.Dir(), s.KeyFile()} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after the first Put: %v", err)
		}
	}
	dir := t.TempDir()
	if _, err := credstore.OpenLocal(dir, filepath.Join(dir, "sub", "key")); err == nil || !strings.Contains(err.Error(), "inside its folder") {
		t.Errorf("OpenLocal with the key file in the folder = %v; want it refused", err)
	}
}

// TestLocalNoClearText: no secret of a grant is in any file the store
// writes, in clear, hex or base64.
func TestLocalNoClearText(t *testing.T) {
	root := t.TempDir()
	s, err := credstore.OpenLocal(filepath.Join(root, "credentials"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var secrets []string
	for _, name := range credstoretest.Names {
		g := credstoretest.NewGrant(name)
		if err := s.Put(ctx, g); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, credstoretest.Secrets(g)...)
	}
	// A rotation leaves no copy of the old token behind either.
	g := credstoretest.NewGrant("rotated")
	secrets = append(secrets, credstoretest.Secrets(g)...)
	for range 3 {
		if err := s.Put(ctx, g); err != nil {
			t.Fatal(err)
		}
		g.Token.RefreshToken = credstoretest.Canary("refresh")
		secrets = append(secrets, g.Token.RefreshToken)
	}
	if err := s.WithLock(ctx, "rotated", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, v := range secrets {
			for _, form := range []string{v, hex.EncodeToString([]byte(v)), base64.StdEncoding.EncodeToString([]byte(v))[:len(v)], base64.RawURLEncoding.EncodeToString([]byte(v))[:len(v)]} {
				if bytes.Contains(data, []byte(form)) {
					t.Errorf("%s holds a secret (%q)", path, form)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A grant file per name and "rotated", its lock, and the key file.
	if want := len(credstoretest.Names) + 3; files != want {
		t.Errorf("the store wrote %d files, want %d (no temporary file left)", files, want)
	}
}

// TestLocalDamaged: a grant file that is not what the store wrote gives an
// error that names it and says what to do; the other grants still work.
func TestLocalDamaged(t *testing.T) {
	ctx := t.Context()
	other := newLocal(t) // another key
	if err := other.Put(ctx, credstoretest.NewGrant("victim")); err != nil {
		t.Fatal(err)
	}
	otherFile := onlyGrantFile(t, other.Dir())
	foreign, err := os.ReadFile(otherFile)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(data []byte, neighbour []byte) []byte{
		"a flipped byte":       func(d, _ []byte) []byte { d[len(d)/2] ^= 1; return d },
		"a flipped last byte":  func(d, _ []byte) []byte { d[len(d)-1] ^= 0x80; return d },
		"cut short":            func(d, _ []byte) []byte { return d[:len(d)-20] },
		"cut to its header":    func(d, _ []byte) []byte { return d[:10] },
		"empty":                func(d, _ []byte) []byte { return nil },
		"text":                 func(d, _ []byte) []byte { return []byte("access_token=hello\n") },
		"another server's":     func(_, n []byte) []byte { return n },
		"another store's":      func(_, _ []byte) []byte { return foreign },
		"too large":            func(d, _ []byte) []byte { return append(d, make([]byte, 2<<20)...) },
		"a header and garbage": func(d, _ []byte) []byte { return append([]byte("MSTCRED\x01"), bytes.Repeat([]byte{7}, 80)...) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			s := newLocal(t)
			victim, neighbour := credstoretest.NewGrant("victim"), credstoretest.NewGrant("neighbour/ü")
			for _, g := range []credstore.Grant{victim, neighbour} {
				if err := s.Put(ctx, g); err != nil {
					t.Fatal(err)
				}
			}
			path := grantFile(t, s, "victim")
			data, _ := os.ReadFile(path)
			ndata, _ := os.ReadFile(grantFile(t, s, "neighbour/ü"))
			if err := os.WriteFile(path, damage(data, ndata), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Get(ctx, "victim")
			var de *credstore.DamagedError
			if !errors.As(err, &de) || de.File != path {
				t.Fatalf("Get of a damaged grant = %v; want a DamagedError for %s", err, path)
			}
			for _, want := range []string{path, "mst auth revoke victim", "mst auth victim"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Get's error %q does not say %q", err, want)
				}
			}
			if errors.Is(err, credstore.ErrNotFound) {
				t.Errorf("Get of a damaged grant = %v; want it told apart from a missing one", err)
			}
			l, err := s.List(ctx)
			if err == nil || !strings.Contains(err.Error(), path) || len(l) != 1 || l[0].Server != "neighbour/ü" {
				t.Errorf("List with a damaged grant = %v, %v; want the other grant and an error naming %s", l, err, path)
			}
			if got, err := s.Get(ctx, "neighbour/ü"); err != nil || credstoretest.Diff(got, neighbour) != "" {
				t.Errorf("Get of the undamaged grant: %v", err)
			}
			// What the message says to do works.
			if err := s.Delete(ctx, "victim"); err != nil {
				t.Fatalf("Delete of a damaged grant: %v", err)
			}
			if err := s.Put(ctx, victim); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(ctx, "victim"); err != nil || credstoretest.Diff(got, victim) != "" {
				t.Errorf("Get after revoke and auth: %v", err)
			}
		})
	}
	// Files that are not grant files by name are no business of List.
	s := newLocal(t)
	if err := s.Put(ctx, credstoretest.NewGrant("a")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"notes.txt", ".tmp-x", strings.Repeat("a", 64) + ".lock", strings.Repeat("A", 64) + ".grant"} {
		if err := os.WriteFile(filepath.Join(s.Dir(), name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := s.List(ctx); err != nil || len(l) != 1 {
		t.Errorf("List with other files in the folder = %v, %v; want the one grant", l, err)
	}
}

func TestLocalKeyFile(t *testing.T) {
	ctx := t.Context()
	s := newLocal(t)
	if err := s.Put(ctx, credstoretest.NewGrant("kept")); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(s.KeyFile())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("missing", func(t *testing.T) {
		if err := os.Remove(s.KeyFile()); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(s.KeyFile(), key, 0o600)
		_, err := s.Get(ctx, "kept")
		if err == nil || errors.Is(err, credstore.ErrNotFound) {
			t.Fatalf("Get without the key file = %v; want an error apart from not found", err)
		}
		for _, want := range []string{s.KeyFile(), "missing", "mst auth revoke kept", "mst auth kept"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Get's error %q does not say %q", err, want)
			}
		}
		if _, err := s.List(ctx); err == nil || !strings.Contains(err.Error(), s.KeyFile()) {
			t.Errorf("List without the key file = %v; want an error naming it", err)
		}
		// A new key would make the grants there unreadable for good.
		if err := s.Put(ctx, credstoretest.NewGrant("new")); err == nil || !strings.Contains(err.Error(), s.KeyFile()) {
			t.Errorf("Put without the key file while grants exist = %v; want it refused, naming the key file", err)
		}
		if _, err := os.Stat(s.KeyFile()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a refused Put made a key file: %v", err)
		}
		// Once a key is back, the grants open again.
		if err := os.WriteFile(s.KeyFile(), key, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "kept"); err != nil {
			t.Errorf("Get with the key file put back: %v", err)
		}
	})
	t.Run("damaged", func(t *testing.T) {
		for _, bad := range [][]byte{nil, []byte("not hex\n"), key[:20], []byte(strings.TrimSpace(string(key)) + "00\n")} {
			if err := os.WriteFile(s.KeyFile(), bad, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Get(ctx, "kept")
			if err == nil || !strings.Contains(err.Error(), s.KeyFile()) || !strings.Contains(err.Error(), "damaged") {
				t.Errorf("Get with key file %q = %v; want an error saying it is damaged, naming it", bad, err)
			}
		}
		os.WriteFile(s.KeyFile(), key, 0o600)
	})
	t.Run("revoke then auth", func(t *testing.T) {
		if err := os.Remove(s.KeyFile()); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "kept"); err != nil {
			t.Fatalf("Delete without the key file: %v", err)
		}
		g := credstoretest.NewGrant("kept")
		if err := s.Put(ctx, g); err != nil {
			t.Fatalf("Put once no grant is left: %v", err)
		}
		if got, err := s.Get(ctx, "kept"); err != nil || credstoretest.Diff(got, g) != "" {
			t.Errorf("Get under the new key: %v", err)
		}
		if nkey, _ := os.ReadFile(s.KeyFile()); bytes.Equal(nkey, key) {
			t.Error("the new key file holds the old key")
		}
	})
}

func onlyGrantFile(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.grant"))
	if err != nil || len(m) != 1 {
		t.Fatalf("grant files in %s: %v, %v; want one", dir, m, err)
	}
	return m[0]
}

// grantFile is the file that holds server's grant in s: the hex SHA-256
// of the name, as the store's doc says.
func grantFile(t *testing.T, s *credstore.Local, server string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(server))
	path := filepath.Join(s.Dir(), hex.EncodeToString(sum[:])+".grant")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}
