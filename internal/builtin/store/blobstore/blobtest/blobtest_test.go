package blobtest_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
)

// openS3 opens the bucket of an s3:// store URL with gocloud, as MST does:
// the bucket and query of the URL, the prefix its path.
func openS3(t *testing.T, storeURL string) *blob.Bucket {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.OpenBucket(t.Context(), (&url.URL{Scheme: "s3", Host: u.Host, RawQuery: u.RawQuery}).String())
	if err != nil {
		t.Fatalf("opening %s: %v", storeURL, err)
	}
	t.Cleanup(func() { b.Close() })
	return blob.PrefixedBucket(b, strings.Trim(u.Path, "/")+"/")
}

func openGCS(t *testing.T, bucket string) *blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(t.Context(), "gs://"+bucket)
	if err != nil {
		t.Fatalf("opening gs://%s: %v", bucket, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// roundTrip writes an object and reads it back.
func roundTrip(t *testing.T, b *blob.Bucket, key string) {
	t.Helper()
	want := []byte("transcript of " + key + "\n")
	if err := b.WriteAll(t.Context(), key, want, &blob.WriterOptions{IfNotExist: true}); err != nil {
		t.Fatalf("writing %s: %v", key, err)
	}
	got, err := b.ReadAll(t.Context(), key)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("reading %s back = %q, %v; want %q", key, got, err, want)
	}
	// The emulators honour the write-once condition MST's transcripts
	// rely on.
	if err := b.WriteAll(t.Context(), key, []byte("again"), &blob.WriterOptions{IfNotExist: true}); gcerrors.Code(err) != gcerrors.FailedPrecondition {
		t.Errorf("a second write of %s on the condition it is not there = %v (%v), want FailedPrecondition", key, err, gcerrors.Code(err))
	}
}

// s3Refused: gocloud reports S3's AccessDenied as PermissionDenied.
func s3Refused(err error) bool { return gcerrors.Code(err) == gcerrors.PermissionDenied }

// gcsRefused: the error is Google's 403 forbidden. gocloud's gcsblob (as
// of v0.49) reports every 403 of GCS as NotFound, not PermissionDenied,
// because GCS answers 403 as well for an object the caller may not see:
// code that tells refused credentials from a missing object must look
// for the googleapi.Error itself.
func gcsRefused(err error) bool {
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || gerr.Code != http.StatusForbidden {
		return false
	}
	for _, e := range gerr.Errors {
		if e.Reason == "forbidden" {
			return true
		}
	}
	return false
}

// checkRefused: through the refusing proxy, reads pass and every write
// fails as the cloud fails one the identity may not make.
func checkRefused(t *testing.T, b *blob.Bucket, readable, identity string, refused func(error) bool) {
	t.Helper()
	if got, err := b.ReadAll(t.Context(), readable); err != nil || len(got) == 0 {
		t.Errorf("reading %s through the refusing proxy = %q, %v; want its content", readable, got, err)
	}
	if _, err := b.Exists(t.Context(), readable); err != nil {
		t.Errorf("Exists(%s) through the refusing proxy = %v", readable, err)
	}
	it := b.List(nil)
	if _, err := it.Next(t.Context()); err != nil {
		t.Errorf("listing through the refusing proxy = %v", err)
	}
	for _, key := range []string{"new-object", readable} {
		err := b.WriteAll(t.Context(), key, []byte("x"), nil)
		if !refused(err) {
			t.Errorf("writing %s through the refusing proxy = %v (code %v), want the provider's access refusal", key, err, gcerrors.Code(err))
		}
		if err != nil && !strings.Contains(err.Error(), identity) {
			t.Errorf("the refusal of %s does not name the identity %s: %v", key, identity, err)
		}
	}
	if got, err := b.ReadAll(t.Context(), readable); err != nil || string(got) == "x" {
		t.Errorf("after the refused writes, %s = %q, %v; want it unchanged", readable, got, err)
	}
}

// TestGCS writes and reads through gocloud with nothing but the
// environment the helper gives, then through a proxy that refuses writes.
func TestGCS(t *testing.T) {
	g := blobtest.StartGCS(t)
	name := g.NewBucket(t)
	blobtest.Setenv(t, g.Env())
	if os.Getenv("STORAGE_EMULATOR_HOST") != g.Host() {
		t.Fatalf("Env() = %v, want STORAGE_EMULATOR_HOST=%s", g.Env(), g.Host())
	}
	roundTrip(t, openGCS(t, name), "team/run/transcripts/v/c.t1.json")
	if other := g.NewBucket(t); other == name {
		t.Errorf("NewBucket gave %s twice", name)
	}
	// OpenBucket sees what was written through the environment.
	if ok, err := g.OpenBucket(t, name).Exists(t.Context(), "team/run/transcripts/v/c.t1.json"); !ok || err != nil {
		t.Errorf("OpenBucket(%s).Exists = %v, %v; want the object", name, ok, err)
	}

	t.Setenv("STORAGE_EMULATOR_HOST", blobtest.RefuseWrites(t, g.Host(), blobtest.Writes))
	checkRefused(t, openGCS(t, name), "team/run/transcripts/v/c.t1.json", blobtest.RefusedGCSIdentity, gcsRefused)
}

// TestS3 writes and reads through gocloud with the store URL and the
// environment the helper gives (the AWS chain, not anonymous), then
// through a proxy that refuses writes.
func TestS3(t *testing.T) {
	s := blobtest.StartS3(t)
	name := s.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	env := s.Env(t)
	for _, kv := range env {
		if strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
			t.Errorf("Env() sets %s: the credentials must come from the profile files", kv)
		}
	}
	blobtest.Setenv(t, env)
	storeURL := s.StoreURL(name, "team/mst")
	if strings.Contains(storeURL, "anonymous") {
		t.Errorf("StoreURL = %s, want the AWS chain, not anonymous", storeURL)
	}
	roundTrip(t, openS3(t, storeURL), "run/transcripts/v/c.t1.json")
	if ok, err := s.OpenBucket(t, name).Exists(t.Context(), "team/mst/run/transcripts/v/c.t1.json"); !ok || err != nil {
		t.Errorf("OpenBucket(%s).Exists = %v, %v; want the object under the URL's prefix", name, ok, err)
	}

	refusing := blobtest.RefuseWrites(t, storeURL, blobtest.Writes)
	if refusing == storeURL || !strings.HasPrefix(refusing, "s3://"+name+"/team/mst?") {
		t.Fatalf("RefuseWrites(%s) = %s, want the same store behind another endpoint", storeURL, refusing)
	}
	checkRefused(t, openS3(t, refusing), "run/transcripts/v/c.t1.json", blobtest.RefusedS3Identity, s3Refused)
}

// TestRefuseSome: the proxy refuses only what refuse picks.
func TestRefuseSome(t *testing.T) {
	s := blobtest.StartS3(t)
	name := s.NewBucket(t)
	blobtest.Setenv(t, s.Env(t))
	b := openS3(t, blobtest.RefuseWrites(t, s.StoreURL(name, "p"), func(r *http.Request) bool {
		return strings.Contains(r.URL.Path, "/locked/")
	}))
	if err := b.WriteAll(t.Context(), "open/a", []byte("a"), nil); err != nil {
		t.Errorf("a write the proxy lets through = %v", err)
	}
	if err := b.WriteAll(t.Context(), "locked/a", []byte("a"), nil); !s3Refused(err) {
		t.Errorf("a write the proxy refuses = %v, want PermissionDenied", err)
	}
}
