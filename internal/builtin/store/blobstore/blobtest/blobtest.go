// Package blobtest starts the bucket emulators MST's tests keep runs in:
// fake-gcs-server for gs:// and gofakes3 for s3://, both real HTTP servers
// on 127.0.0.1 inside the test's process, gone when the test ends. It also
// puts a proxy in front of either that refuses the requests a test picks
// the way the cloud refuses an identity without the right role, so a test
// can play a worker whose credentials may not write, and a FaultProxy a
// test switches at any moment to refuse connections, hang, answer 5xx,
// cut answers or trickle them, and back (faults.go).
//
// Only tests import it. An emulator that cannot start fails the test: it
// never skips.
//
// A process reaches the GCS emulator through STORAGE_EMULATOR_HOST (Env),
// as the Google client libraries do, with no credentials. It reaches the
// S3 emulator through the endpoint in an s3:// URL (StoreURL) and the AWS
// SDK's default chain: Env names a credentials file and a config file
// with a dummy default profile, so the SDK signs its requests as it would
// for a user, without anonymous=true. The AWS variables of the test's own
// environment that come first in the chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY) still win over the files: a test that must not
// see them unsets them.
package blobtest

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"google.golang.org/api/option"
)

// Region is the region the S3 emulator's URLs and profile name.
const Region = "us-east-1"

// The identities the refusals of RefuseWrites name, as each cloud names
// the caller it turns away.
const (
	RefusedGCSIdentity = "mst-worker@blobtest.iam.gserviceaccount.com"
	RefusedS3Identity  = "arn:aws:iam::000000000000:user/mst-worker"
)

// bucketSeq numbers the buckets of every emulator in the process, so no
// two tests share one.
var bucketSeq atomic.Int64

func bucketName() string {
	return fmt.Sprintf("mst-test-%d-%d", os.Getpid(), bucketSeq.Add(1))
}

// GCS is a fake-gcs-server on 127.0.0.1.
type GCS struct {
	srv  *fakestorage.Server
	host string
	stop func()
}

// StartGCS starts a GCS emulator for the test and stops it when the test
// ends. The emulator's public host is its own address, so it serves reads
// (a fake-gcs-server serves object contents only to requests for its
// public host).
func StartGCS(t testing.TB) *GCS {
	t.Helper()
	g, err := NewGCS()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(g.Close)
	return g
}

// NewGCS starts a GCS emulator that runs until Close, for a caller that
// is not a test (a testscript command).
func NewGCS() (*GCS, error) {
	// The listener comes first, so the server can be told its address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot start the GCS emulator: no port on 127.0.0.1: %v", err)
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", NoListener: true, PublicHost: l.Addr().String(),
	})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("cannot start the GCS emulator (fake-gcs-server): %v", err)
	}
	hs := &http.Server{Handler: srv.HTTPHandler()}
	go hs.Serve(l)
	return &GCS{srv: srv, host: l.Addr().String(), stop: func() {
		hs.Close()
		srv.Stop()
	}}, nil
}

// Close stops the emulator.
func (g *GCS) Close() { g.stop() }

// CreateBucket makes an empty bucket of the given name.
func (g *GCS) CreateBucket(name string) {
	g.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
}

// Host is the emulator's address, HOST:PORT, the value of
// STORAGE_EMULATOR_HOST.
func (g *GCS) Host() string { return g.host }

// Env is the environment that points the Google client libraries (and so
// MST) at the emulator: STORAGE_EMULATOR_HOST.
func (g *GCS) Env() []string { return []string{"STORAGE_EMULATOR_HOST=" + g.host} }

// NewBucket makes an empty bucket and returns its name.
func (g *GCS) NewBucket(t testing.TB) string {
	t.Helper()
	name := bucketName()
	g.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	return name
}

// OpenBucket opens a bucket of the emulator with gocloud, without reading
// STORAGE_EMULATOR_HOST (so a test may do it while its environment points
// elsewhere), and closes it when the test ends.
func (g *GCS) OpenBucket(t testing.TB, name string) *blob.Bucket {
	t.Helper()
	ctx := context.Background()
	c, err := storage.NewClient(ctx, option.WithoutAuthentication(), option.WithEndpoint("http://"+g.host+"/storage/v1/"))
	if err != nil {
		t.Fatalf("a client of the GCS emulator at %s: %v", g.host, err)
	}
	b, err := gcsblob.OpenBucket(ctx, nil, name, &gcsblob.Options{Client: c})
	if err != nil {
		c.Close()
		t.Fatalf("opening bucket %s of the GCS emulator: %v", name, err)
	}
	t.Cleanup(func() {
		b.Close()
		c.Close()
	})
	return b
}

// S3 is gofakes3 over HTTP on 127.0.0.1.
type S3 struct {
	backend *s3mem.Backend
	url     string
	stop    func()
}

// StartS3 starts an S3 emulator for the test and stops it when the test
// ends.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	s, err := NewS3()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewS3 starts an S3 emulator that runs until Close, for a caller that is
// not a test (a testscript command).
func NewS3() (*S3, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot start the S3 emulator: no port on 127.0.0.1: %v", err)
	}
	backend := s3mem.New()
	ts := &httptest.Server{
		Listener: l,
		Config:   &http.Server{Handler: gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()},
	}
	ts.Start()
	return &S3{backend: backend, url: ts.URL, stop: ts.Close}, nil
}

// Close stops the emulator.
func (s *S3) Close() { s.stop() }

// CreateBucket makes an empty bucket of the given name.
func (s *S3) CreateBucket(name string) error { return s.backend.CreateBucket(name) }

// ProfileEnv writes, into dir, the AWS files of a dummy default profile
// and returns the environment that makes the AWS default chain use them
// against the emulator (what Env does for a test).
func ProfileEnv(dir string) ([]string, error) {
	creds := filepath.Join(dir, "credentials")
	config := filepath.Join(dir, "config")
	// The emulator checks no signature: these are placeholders, not keys.
	files := map[string]string{
		creds:  "[default]\naws_access_key_id = blobtest-placeholder-id\naws_secret_access_key = blobtest-placeholder\n",
		config: "[default]\nregion = " + Region + "\n",
	}
	for path, text := range files {
		// Readable by all: a container's user may be another, and the
		// files hold placeholders only.
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("writing the S3 emulator's AWS profile: %v", err)
		}
	}
	return []string{
		"AWS_SHARED_CREDENTIALS_FILE=" + creds,
		"AWS_CONFIG_FILE=" + config,
		"AWS_PROFILE=default",
		"AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}, nil
}

// URL is the emulator's endpoint, http://HOST:PORT.
func (s *S3) URL() string { return s.url }

// NewBucket makes an empty bucket and returns its name.
func (s *S3) NewBucket(t testing.TB) string {
	t.Helper()
	name := bucketName()
	if err := s.backend.CreateBucket(name); err != nil {
		t.Fatalf("creating bucket %s in the S3 emulator: %v", name, err)
	}
	return name
}

// StoreURL is the s3:// URL of prefix in bucket on this emulator, with
// the query an S3-compatible endpoint needs (endpoint, use_path_style,
// disable_https, region) and no credentials: those come from the AWS
// chain (Env).
func (s *S3) StoreURL(bucket, prefix string) string {
	return storeURL(s.url, bucket, prefix)
}

func storeURL(endpoint, bucket, prefix string) string {
	q := url.Values{"endpoint": {endpoint}, "use_path_style": {"true"}, "disable_https": {"true"}, "region": {Region}}
	return "s3://" + bucket + "/" + strings.Trim(prefix, "/") + "?" + q.Encode()
}

// Env is the environment that lets the AWS SDK's default chain work
// against the emulator: AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE
// name files it writes in t.TempDir() with a dummy default profile
// (AWS_PROFILE=default picks it whatever the test's own environment
// says), AWS_REGION is the emulator's region, and
// AWS_EC2_METADATA_DISABLED keeps the SDK from asking a metadata service
// that is not there. It sets no AWS_ACCESS_KEY_ID or
// AWS_SECRET_ACCESS_KEY.
func (s *S3) Env(t testing.TB) []string {
	t.Helper()
	env, err := ProfileEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// OpenBucket opens a bucket of the emulator with gocloud, anonymously (so
// it needs none of Env), and closes it when the test ends.
func (s *S3) OpenBucket(t testing.TB, name string) *blob.Bucket {
	t.Helper()
	b, err := (&s3blob.URLOpener{}).OpenBucketURL(context.Background(), &url.URL{
		Scheme: "s3", Host: name,
		RawQuery: url.Values{"endpoint": {s.url}, "use_path_style": {"true"}, "disable_https": {"true"}, "region": {Region}, "anonymous": {"true"}}.Encode(),
	})
	if err != nil {
		t.Fatalf("opening bucket %s of the S3 emulator: %v", name, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Setenv sets each NAME=VALUE of env with t.Setenv, for the test's own
// process (and the processes it starts without an environment of their
// own).
func Setenv(t testing.TB, env []string) {
	t.Helper()
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("blobtest.Setenv: %q is not NAME=VALUE", kv)
		}
		t.Setenv(k, v)
	}
}

// Writes picks the requests that create, change or delete objects (every
// method but GET, HEAD and OPTIONS): RefuseWrites(t, target, Writes) plays
// an identity that may read the bucket but not write it.
func Writes(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// RefuseWrites starts a reverse proxy in front of the emulator at target
// that answers the requests refuse picks with 403 and the provider's own
// access-denied error, naming RefusedGCSIdentity or RefusedS3Identity,
// and forwards the rest.
//
// target is written the way a test points a client at an emulator, and
// the proxy's address comes back written the same way: HOST:PORT (GCS's
// Host, for STORAGE_EMULATOR_HOST), an http:// URL (S3's URL), or an
// s3:// store URL (StoreURL), which comes back with the proxy as its
// endpoint.
//
// A request to the GCS JSON API (/storage/v1/, /upload/storage/v1/) is
// refused with Google's JSON error (reason forbidden, "does not have
// storage.objects.create access"); any other, to S3 or to GCS's XML API,
// with the XML error <Error><Code>AccessDenied</Code>…</Error> both of
// those send.
func RefuseWrites(t testing.TB, target string, refuse func(r *http.Request) bool) string {
	t.Helper()
	upstream, back := splitTarget(t, "RefuseWrites", target)
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		// SetURL also sends the emulator its own address as the Host
		// header, which fake-gcs-server needs to serve reads.
		pr.SetURL(upstream)
	}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse(r) {
			deny(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return back(ts.URL)
}

// deny answers r as the provider does a caller without the permission.
func deny(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/storage/v1/") || strings.HasPrefix(r.URL.Path, "/upload/storage/v1/") {
		perm := "storage.objects.create"
		switch {
		case r.Method == http.MethodDelete:
			perm = "storage.objects.delete"
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o"):
			perm = "storage.objects.list"
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			perm = "storage.objects.get"
		}
		msg := fmt.Sprintf("%s does not have %s access to the Google Cloud Storage object. Permission '%s' denied on resource (or it may not exist).", RefusedGCSIdentity, perm, perm)
		body, _ := json.Marshal(map[string]any{"error": map[string]any{
			"code": http.StatusForbidden, "message": msg,
			"errors": []map[string]string{{"message": msg, "domain": "global", "reason": "forbidden"}},
		}})
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusForbidden)
		w.Write(body)
		return
	}
	action := "s3:PutObject"
	switch r.Method {
	case http.MethodDelete:
		action = "s3:DeleteObject"
	case http.MethodGet, http.MethodHead:
		action = "s3:GetObject"
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	if r.Method == http.MethodHead {
		return // a HEAD answer has no body
	}
	var msg strings.Builder
	xml.EscapeText(&msg, []byte(fmt.Sprintf("User: %s is not authorized to perform: %s on resource: \"arn:aws:s3:::%s\" because no identity-based policy allows the %s action",
		RefusedS3Identity, action, strings.TrimPrefix(r.URL.Path, "/"), action)))
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>AccessDenied</Code><Message>%s</Message><RequestId>blobtest</RequestId><HostId>blobtest</HostId></Error>`, msg.String())
}

// splitTarget reads an emulator's address written as a test writes it
// (HOST:PORT, an http:// URL, an s3:// store URL) for fn: the emulator's
// base URL, and a function that writes a proxy's address the same way.
func splitTarget(t testing.TB, fn, target string) (upstream *url.URL, back func(proxy string) string) {
	t.Helper()
	switch {
	case strings.HasPrefix(target, "s3://"):
		u, err := url.Parse(target)
		if err != nil {
			t.Fatalf("blobtest.%s: %q is not a URL: %v", fn, target, err)
		}
		q := u.Query()
		if q.Get("endpoint") == "" {
			t.Fatalf("blobtest.%s: %s has no endpoint= to put a proxy in front of", fn, target)
		}
		upstream, err = url.Parse(q.Get("endpoint"))
		if err != nil {
			t.Fatalf("blobtest.%s: the endpoint of %s is not a URL: %v", fn, target, err)
		}
		back = func(proxy string) string {
			q.Set("endpoint", proxy)
			u.RawQuery = q.Encode()
			return u.String()
		}
	case strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://"):
		u, err := url.Parse(target)
		if err != nil {
			t.Fatalf("blobtest.%s: %q is not a URL: %v", fn, target, err)
		}
		upstream = u
		back = func(proxy string) string { return proxy }
	default:
		if _, _, err := net.SplitHostPort(target); err != nil {
			t.Fatalf("blobtest.%s: %q is neither HOST:PORT nor an http:// or s3:// URL", fn, target)
		}
		upstream = &url.URL{Scheme: "http", Host: target}
		back = func(proxy string) string { return strings.TrimPrefix(proxy, "http://") }
	}
	upstream.Path, upstream.RawPath, upstream.RawQuery = "", "", ""
	return upstream, back
}
