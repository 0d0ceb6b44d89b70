package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
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
// trial runs.
func Open(ctx context.Context, u *url.URL, o Options) (*Store, error) {
	b, err := openBucket(ctx, u)
	if err != nil {
		return nil, err
	}
	where := u.Scheme + "://" + u.Host
	ok, err := b.IsAccessible(ctx)
	if err != nil {
		b.Close()
		return nil, describe(where, "reaching the bucket", err)
	}
	if !ok {
		b.Close()
		return nil, fmt.Errorf("%s: the bucket %s does not exist (or this identity may not see it): create it, or give another in the URL", where, u.Host)
	}
	return New(b, u, o), nil
}

func openBucket(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	switch u.Scheme {
	case "gs":
		// storage.NewClient finds the application default credentials,
		// or talks to STORAGE_EMULATOR_HOST without any.
		c, err := storage.NewClient(ctx)
		if err != nil {
			return nil, fmt.Errorf("gs://%s: no Google credentials (%v); %s", u.Host, err, credentialsHint("gs://"))
		}
		return gcsblob.OpenBucket(ctx, nil, u.Host, &gcsblob.Options{Client: c})
	case "s3":
		// The AWS SDK reads the default chain, AWS_REGION and
		// AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) itself.
		b, err := (&s3blob.URLOpener{}).OpenBucketURL(ctx, &url.URL{Scheme: "s3", Host: u.Host, RawQuery: u.RawQuery})
		if err != nil {
			return nil, fmt.Errorf("s3://%s: %w", u.Host, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s: not a store URL", u.Redacted())
}
