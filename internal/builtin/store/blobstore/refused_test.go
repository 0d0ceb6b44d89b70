package blobstore_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// TestRefusedIdentity plays an identity the bucket refuses, on both
// clouds: a refused write says the credentials were refused, names the
// identity and what to grant, and a refused read is an error, never "not
// stored" (GCS's 403 must not read as an absence, or a resume would run
// stored trials again). CheckWrite, what a worker runs before its first
// trial, fails the same way.
func TestRefusedIdentity(t *testing.T) {
	for _, kind := range []string{"gs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			var open func(refuse func(*http.Request) bool) *blobstore.Store
			var role string
			switch kind {
			case "gs":
				g := blobtest.StartGCS(t)
				name := g.NewBucket(t)
				role, open = "Storage Object User", func(refuse func(*http.Request) bool) *blobstore.Store {
					t.Setenv("STORAGE_EMULATOR_HOST", blobtest.RefuseWrites(t, g.Host(), refuse))
					return mustOpen(t, "gs://"+name+"/team")
				}
			case "s3":
				s := blobtest.StartS3(t)
				name := s.NewBucket(t)
				blobtest.Setenv(t, s.Env(t))
				role, open = "s3:PutObject", func(refuse func(*http.Request) bool) *blobstore.Store {
					return mustOpen(t, blobtest.RefuseWrites(t, s.StoreURL(name, "team"), refuse))
				}
			}
			// A run made while every request passes.
			st := open(func(*http.Request) bool { return false })
			run, err := st.Create(t.Context(), "refused-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := run.WriteRun(t.Context(), transcript.Run{Kind: "mst.run", Version: transcript.RunVersion, ID: "refused-1"}); err != nil {
				t.Fatal(err)
			}
			k := transcript.Key{Case: "a", Variant: "v", Trial: 1}
			if _, err := run.WriteTranscript(t.Context(), &transcript.Transcript{Kind: "mst.transcript", Version: transcript.Version, Key: k, Outcome: transcript.Outcome{Status: transcript.Answered}}); err != nil {
				t.Fatal(err)
			}

			// Writes refused.
			st = open(blobtest.Writes)
			if _, err := st.Create(t.Context(), "refused-2", nil); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("Create with writes refused = %v, want an error saying the credentials were refused", err)
			}
			again, err := st.Open(t.Context(), "refused-1", nil)
			if err != nil {
				t.Fatalf("Open with writes refused = %v; reads still pass", err)
			}
			err = again.(store.WriteChecker).CheckWrite(t.Context())
			if err == nil {
				t.Fatal("CheckWrite with writes refused = nil")
			}
			for _, want := range []string{"the bucket refused", role} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("CheckWrite = %v\nwant it to say %q", err, want)
				}
			}

			// Reads refused: an error, never "not stored".
			st = open(func(r *http.Request) bool {
				p, _ := url.PathUnescape(r.URL.Path + "?" + r.URL.RawQuery)
				return r.Method == http.MethodGet && strings.Contains(p, "transcripts/")
			})
			again, err = st.Open(t.Context(), "refused-1", nil)
			if err != nil {
				t.Fatalf("Open with transcript reads refused = %v", err)
			}
			_, err = again.ReadTranscript(t.Context(), k)
			if err == nil || errors.Is(err, store.ErrNotFound) {
				t.Errorf("ReadTranscript with reads refused = %v, want an error that is not ErrNotFound", err)
			}
		})
	}
}

func mustOpen(t *testing.T, loc string) *blobstore.Store {
	t.Helper()
	u, err := blobstore.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := blobstore.Open(t.Context(), u, blobstore.Options{Eval: "refused"})
	if err != nil {
		t.Fatalf("opening %s: %v", loc, err)
	}
	return s
}
