package blobstore_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"google.golang.org/api/option"

	"github.com/mst-eval/mst/store/blobstore"
)

// The emulators are real servers on loopback, started in this process:
// fake-gcs-server for gs:// and gofakes3 for s3://. A test that cannot
// start one fails.

// gcsEmulator is a fake-gcs-server on 127.0.0.1; its address is host.
type gcsEmulator struct {
	srv  *fakestorage.Server
	host string
}

func startGCS(t *testing.T) *gcsEmulator {
	t.Helper()
	// The listener comes first so the server knows its own address: it
	// serves reads only to requests for its public host.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot start the GCS emulator: %v", err)
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", NoListener: true, PublicHost: l.Addr().String(),
	})
	if err != nil {
		l.Close()
		t.Fatalf("cannot start the GCS emulator (fake-gcs-server): %v", err)
	}
	hs := &http.Server{Handler: srv.HTTPHandler()}
	go hs.Serve(l)
	t.Cleanup(func() {
		hs.Close()
		srv.Stop()
	})
	return &gcsEmulator{srv: srv, host: l.Addr().String()}
}

var bucketSeq atomic.Int64

// newBucket makes an empty bucket and opens it as gocloud does for an
// emulator: the JSON API at the emulator's address, no credentials.
func (e *gcsEmulator) newBucket(t *testing.T) (*blob.Bucket, string) {
	t.Helper()
	name := fmt.Sprintf("mst-test-%d", bucketSeq.Add(1))
	e.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	c, err := storage.NewClient(context.Background(), option.WithoutAuthentication(),
		option.WithEndpoint("http://"+e.host+"/storage/v1/"))
	if err != nil {
		t.Fatalf("a client of the GCS emulator: %v", err)
	}
	b, err := gcsblob.OpenBucket(context.Background(), nil, name, &gcsblob.Options{Client: c})
	if err != nil {
		t.Fatalf("opening bucket %s of the GCS emulator: %v", name, err)
	}
	t.Cleanup(func() { b.Close() })
	return b, name
}

// s3Emulator is gofakes3 over HTTP on 127.0.0.1.
type s3Emulator struct {
	backend *s3mem.Backend
	url     string
}

func startS3(t *testing.T) *s3Emulator {
	t.Helper()
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	ts := httptest.NewServer(faker.Server())
	t.Cleanup(ts.Close)
	return &s3Emulator{backend: backend, url: ts.URL}
}

// newBucket makes an empty bucket and returns the s3:// URL of a store in
// it, with the query an S3-compatible endpoint needs.
func (e *s3Emulator) newBucket(t *testing.T, prefix string) *url.URL {
	t.Helper()
	name := fmt.Sprintf("mst-test-%d", bucketSeq.Add(1))
	if err := e.backend.CreateBucket(name); err != nil {
		t.Fatalf("creating bucket %s in the S3 emulator: %v", name, err)
	}
	u, err := blobstore.Parse(e.storeURL(name, prefix, true))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// storeURL is the s3:// URL of prefix in bucket; anonymous asks the SDK
// for no credentials at all.
func (e *s3Emulator) storeURL(bucket, prefix string, anonymous bool) string {
	q := url.Values{"endpoint": {e.url}, "use_path_style": {"true"}, "disable_https": {"true"}, "region": {"us-east-1"}}
	if anonymous {
		q.Set("anonymous", "true")
	}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}
