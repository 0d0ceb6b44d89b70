package blobstore_test

import (
	"net/url"
	"testing"

	"gocloud.dev/blob"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
)

// The emulators are blobtest's: fake-gcs-server for gs:// and gofakes3
// for s3://, real servers on loopback in this process. A test that cannot
// start one fails.

type gcsEmulator struct {
	*blobtest.GCS
	host string
}

func startGCS(t *testing.T) *gcsEmulator {
	t.Helper()
	g := blobtest.StartGCS(t)
	return &gcsEmulator{GCS: g, host: g.Host()}
}

// newBucket makes an empty bucket and opens it as gocloud does for an
// emulator: the JSON API at the emulator's address, no credentials.
func (e *gcsEmulator) newBucket(t *testing.T) (*blob.Bucket, string) {
	t.Helper()
	name := e.NewBucket(t)
	return e.OpenBucket(t, name), name
}

type s3Emulator struct{ *blobtest.S3 }

func startS3(t *testing.T) *s3Emulator {
	t.Helper()
	return &s3Emulator{blobtest.StartS3(t)}
}

// newBucket makes an empty bucket and returns the s3:// URL of a store in
// it, opened anonymously: the parallel tests cannot set the AWS chain's
// variables.
func (e *s3Emulator) newBucket(t *testing.T, prefix string) *url.URL {
	t.Helper()
	u, err := blobstore.Parse(e.storeURL(e.NewBucket(t), prefix, true))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// storeURL is the s3:// URL of prefix in bucket; anonymous asks the SDK
// for no credentials at all.
func (e *s3Emulator) storeURL(bucket, prefix string, anonymous bool) string {
	u := e.StoreURL(bucket, prefix)
	if anonymous {
		u += "&anonymous=true"
	}
	return u
}
