package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"google.golang.org/api/option"

	"github.com/mst-eval/mst/store"
)

// Schemes are the URL schemes this package serves.
var Schemes = []string{"gs", "s3"}

// s3Params are the query parameters an s3:// URL may carry: where the
// service is and how to talk to it, never a credential.
var s3Params = []string{
	"region", "endpoint", "profile", "hostname_immutable", "fips", "dualstack", "rate_limiter_capacity",
	"request_checksum_calculation", "response_checksum_validation", "anonymous",
	"use_path_style", "s3ForcePathStyle", "disable_https", "accelerate", "ssetype", "kmskeyid",
}

// Parse checks a store URL, gs://BUCKET/PREFIX or s3://BUCKET/PREFIX?…,
// and says what is wrong with one MST cannot use.
func Parse(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// (url.Parse's error quotes the URL, which may hold a password.)
		return nil, fmt.Errorf("the store location is not a URL MST can read: write gs://BUCKET/PREFIX or s3://BUCKET/PREFIX, with %%XX escapes only for bytes a URL cannot hold")
	}
	// Errors show the URL without any password in it.
	raw = u.Redacted()
	if !slices.Contains(Schemes, u.Scheme) {
		return nil, fmt.Errorf("%s: MST cannot keep results at a %s: URL; it keeps them in a folder, at gs://BUCKET/PREFIX or at s3://BUCKET/PREFIX", raw, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("%s: name the bucket after %s://, as in %s://my-bucket/mst", raw, u.Scheme, u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s://%s: a store URL carries no credentials: MST takes them from the cloud's own chain (%s); remove the part before @", u.Scheme, u.Host, chainName(u.Scheme))
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("%s: a store URL has no #fragment", raw)
	}
	q := u.Query()
	switch u.Scheme {
	case "gs":
		if len(q) > 0 {
			return nil, fmt.Errorf("%s: a gs:// store takes no query parameters (%s): the credentials are the machine's application default credentials, and STORAGE_EMULATOR_HOST points MST at an emulator", raw, strings.Join(sortedKeys(q), ", "))
		}
	case "s3":
		for _, k := range sortedKeys(q) {
			if !slices.Contains(s3Params, k) {
				return nil, fmt.Errorf("%s: query parameter %q is not one an s3:// store takes (%s); credentials come from the AWS chain, never the URL", raw, k, strings.Join(s3Params, ", "))
			}
		}
	}
	if err := checkBucket(u.Scheme, u.Host); err != nil {
		return nil, fmt.Errorf("%s://%s: %w", u.Scheme, u.Host, err)
	}
	for _, seg := range strings.Split(strings.Trim(u.Path, "/"), "/") {
		if seg == "." || seg == ".." {
			return nil, fmt.Errorf("%s: a store URL's path has no . or .. in it", raw)
		}
	}
	return u, nil
}

func chainName(scheme string) string {
	if scheme == "gs" {
		return "Google application default credentials"
	}
	return "the AWS default credential chain"
}

func sortedKeys(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Open opens the store at u (Parse it first), whose path is the prefix,
// with the cloud's own credentials, and checks that the bucket can be
// reached with them: a store that cannot be used fails here, before any
// trial runs. All of it takes at most Limits.Open (10 s by default): a
// store that does not answer fails wrapping store.ErrUnavailable, naming
// the URL and the cause.
func Open(ctx context.Context, u *url.URL, o Options) (*Store, error) {
	lim := o.Limits.withDefaults()
	name := storeName(u)
	deadline := time.Now().Add(lim.Open)
	// Making the client may look for credentials (a metadata server, a
	// token file) with no bound of its own. The client keeps the context
	// it was made with for its credentials, so it is not given one that
	// ends: it is made aside and waited for until the deadline.
	type opened struct {
		b   *blob.Bucket
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		b, err := openBucket(ctx, u, o)
		ch <- opened{b, err}
	}()
	late := func() {
		if r := <-ch; r.b != nil {
			r.b.Close()
		}
	}
	t := time.NewTimer(lim.Open)
	defer t.Stop()
	var b *blob.Bucket
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		b = r.b
	case <-ctx.Done():
		go late()
		return nil, fmt.Errorf("%s: %w", name, context.Cause(ctx))
	case <-t.C:
		go late()
		return nil, fmt.Errorf("%s: making the %s client took longer than %s (looking for credentials?): %w", name, cloudName(u.Scheme), lim.Open, store.ErrUnavailable)
	}
	s := New(b, u, o)
	check := lim
	check.Call = max(time.Until(deadline), time.Millisecond)
	check.Try = min(check.Try, check.Call)
	ok, err := s.isAccessible(ctx, &check)
	if err != nil {
		b.Close()
		if errors.Is(err, store.ErrUnavailable) {
			return nil, fmt.Errorf("%s: %w; check that the address is right and the service is up, then try again", name, err)
		}
		return nil, describe(name, "reaching the bucket", err)
	}
	if !ok {
		b.Close()
		return nil, fmt.Errorf("%s: the bucket %s does not exist (or this identity may not see it): create it, or give another in the URL", u.Scheme+"://"+u.Host, u.Host)
	}
	return s, nil
}

func (s *Store) isAccessible(ctx context.Context, limits *Limits) (bool, error) {
	var ok bool
	err := s.do(ctx, call{doing: "reaching the bucket", limits: limits}, func(ctx context.Context, _ func(int64)) error {
		var err error
		ok, err = s.bucket.IsAccessible(ctx)
		return err
	})
	return ok, err
}

// storeName is u without its query: scheme://bucket/prefix.
func storeName(u *url.URL) string {
	n := u.Scheme + "://" + u.Host
	if p := strings.Trim(u.Path, "/"); p != "" {
		n += "/" + p
	}
	return n
}

func cloudName(scheme string) string {
	if scheme == "gs" {
		return "Google Cloud Storage"
	}
	return "S3"
}

// describeEndpoint returns the store's name for reports, the host of its
// service, and where that address came from, for errors.
func describeEndpoint(u *url.URL, o Options) (name, host, via string) {
	name = storeName(u)
	switch u.Scheme {
	case "gs":
		if o.gcsEndpoint != "" {
			return name, o.gcsEndpoint, ""
		}
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			return name, h, " (STORAGE_EMULATOR_HOST=" + h + ")"
		}
		return name, "storage.googleapis.com", ""
	case "s3":
		if e := u.Query().Get("endpoint"); e != "" {
			return name, endpointHost(e), " (endpoint=" + e + " in the URL)"
		}
		for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
			if e := os.Getenv(v); e != "" {
				return name, endpointHost(e), " (" + v + "=" + e + ")"
			}
		}
		return name, "the S3 service", ""
	}
	return name, u.Host, ""
}

func endpointHost(e string) string {
	if u, err := url.Parse(e); err == nil && u.Host != "" {
		return u.Host
	}
	return e
}

// openBucket opens the bucket of u with the cloud SDK's own retries
// turned off: the store's calls retry (calls.go), under their deadlines,
// and report each retry. Left on, the GCS client retries an idempotent
// call until its context ends, and the AWS SDK three times with backoff,
// neither of them seen.
func openBucket(ctx context.Context, u *url.URL, o Options) (*blob.Bucket, error) {
	switch u.Scheme {
	case "gs":
		// storage.NewClient finds the application default credentials,
		// or talks to STORAGE_EMULATOR_HOST without any.
		var opts []option.ClientOption
		if o.gcsEndpoint != "" {
			opts = append(opts, option.WithoutAuthentication(), option.WithEndpoint("http://"+o.gcsEndpoint+"/storage/v1/"))
		}
		c, err := storage.NewClient(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("gs://%s: no Google credentials (%v); %s", u.Host, err, credentialsHint("gs://"))
		}
		c.SetRetry(storage.WithPolicy(storage.RetryNever))
		return gcsblob.OpenBucket(ctx, nil, u.Host, &gcsblob.Options{Client: c})
	case "s3":
		b, err := openS3(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("s3://%s: %w", u.Host, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s: not a store URL", u.Redacted())
}

// openS3 is gocloud's s3blob.URLOpener.OpenBucketURL with the AWS SDK's
// retries turned off. The AWS SDK reads the default chain, AWS_REGION
// and AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) itself; the URL's query
// (Parse checked its names) says the rest.
func openS3(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	var bo s3blob.Options
	var so []func(*s3.Options)
	take := func(key string) (string, bool) {
		v := q.Get(key)
		q.Del(key)
		return v, v != ""
	}
	flag := func(key string, set func(bool)) error {
		if v, ok := take(key); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%s: write true or false", key, v)
			}
			set(b)
		}
		return nil
	}
	if v, ok := take("ssetype"); ok {
		known := types.ServerSideEncryptionAes256.Values()
		i := slices.IndexFunc(known, func(t types.ServerSideEncryption) bool { return strings.EqualFold(string(t), v) })
		if i < 0 {
			return nil, fmt.Errorf("ssetype=%s: not an encryption S3 knows (%v)", v, known)
		}
		bo.EncryptionType = known[i]
	}
	if v, ok := take("kmskeyid"); ok {
		bo.KMSEncryptionID = v
	}
	for _, f := range []struct {
		key string
		set func(*s3.Options, bool)
	}{
		{"accelerate", func(o *s3.Options, b bool) { o.UseAccelerate = b }},
		{"disable_https", func(o *s3.Options, b bool) { o.EndpointOptions.DisableHTTPS = b }},
		{"use_path_style", func(o *s3.Options, b bool) { o.UsePathStyle = b }},
		{"s3ForcePathStyle", func(o *s3.Options, b bool) { o.UsePathStyle = b }},
	} {
		if err := flag(f.key, func(b bool) { so = append(so, func(o *s3.Options) { f.set(o, b) }) }); err != nil {
			return nil, err
		}
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	cfg.RetryMaxAttempts = 0 // AWS_MAX_ATTEMPTS would wrap the retryer again
	// The SDK's own warnings (a body it could not drain) would go to
	// the process's stderr, unasked.
	cfg.Logger = logging.Nop{}
	client := s3.NewFromConfig(cfg, so...)
	// The upload manager does not take the checksum setting from the
	// client (as gocloud's opener says).
	bo.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	return s3blob.OpenBucket(ctx, client, u.Host, &bo)
}
