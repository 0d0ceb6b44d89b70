package blobstore

import (
	"fmt"
	"regexp"
	"strings"
)

// The bucket naming rules of each service, as documented in 2026:
// https://cloud.google.com/storage/docs/buckets#naming and
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html
// (general purpose buckets). A name the service could never have given
// is refused when the URL is parsed, saying what is wrong and what is
// allowed, rather than met as a puzzling error (or a different bucket)
// later.

var (
	dottedQuad = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$`)
	// googleish matches "google" once 0 is read as o and 1 as l, with
	// any number of o's: google, g00gle, goog1e, gooogle.
	googleish = regexp.MustCompile(`go{2,}gle`)
)

const (
	gcsRule = "a GCS bucket name is 3 to 63 characters (up to 222 when it has dots, at most 63 between two dots) of lower-case letters, digits, -, _ and ., starting and ending with a letter or a digit"
	s3Rule  = "an S3 bucket name is 3 to 63 characters of lower-case letters, digits, - and ., starting and ending with a letter or a digit, with no two dots in a row"
)

// checkBucket says what is wrong with name as the name of a bucket of the
// scheme's service, or nil.
func checkBucket(scheme, name string) error {
	switch scheme {
	case "gs":
		return checkGCSBucket(name)
	case "s3":
		return checkS3Bucket(name)
	}
	return nil
}

func checkGCSBucket(name string) error {
	bad := func(what string) error {
		return fmt.Errorf("%q cannot be the name of a bucket: %s; %s", name, what, gcsRule)
	}
	if err := checkShape(name, "-_.", bad); err != nil {
		return err
	}
	if strings.Contains(name, ".") {
		if len(name) > 222 {
			return bad(fmt.Sprintf("it is %d characters long", len(name)))
		}
		for _, part := range strings.Split(name, ".") {
			if len(part) > 63 {
				return bad(fmt.Sprintf("its part %q is %d characters long", part, len(part)))
			}
		}
	} else if len(name) > 63 {
		return bad(fmt.Sprintf("it is %d characters long", len(name)))
	}
	if dottedQuad.MatchString(name) {
		return bad("it is an IP address")
	}
	if strings.HasPrefix(name, "goog") {
		return bad(`it starts with "goog", which Google keeps for itself`)
	}
	if googleish.MatchString(strings.NewReplacer("0", "o", "1", "l").Replace(name)) {
		return bad(`it has "google" in it (or a spelling close to it), which Google refuses`)
	}
	return nil
}

func checkS3Bucket(name string) error {
	bad := func(what string) error {
		return fmt.Errorf("%q cannot be the name of a bucket: %s; %s", name, what, s3Rule)
	}
	if err := checkShape(name, "-.", bad); err != nil {
		return err
	}
	if len(name) > 63 {
		return bad(fmt.Sprintf("it is %d characters long", len(name)))
	}
	if strings.Contains(name, "..") {
		return bad("it has two dots in a row")
	}
	if dottedQuad.MatchString(name) {
		return bad("it is an IP address")
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return bad(fmt.Sprintf("it starts with %q, which S3 keeps for itself", p))
		}
	}
	for _, sfx := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, sfx) {
			return bad(fmt.Sprintf("it ends with %q, which S3 keeps for access points and other kinds of bucket", sfx))
		}
	}
	return nil
}

// checkShape checks what both services ask: at least 3 characters, only
// lower-case letters, digits and the punctuation given, a letter or digit
// at each end.
func checkShape(name, punct string, bad func(string) error) error {
	if len(name) < 3 {
		return bad(fmt.Sprintf("it is %d characters long", len(name)))
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', strings.ContainsRune(punct, c):
		case c >= 'A' && c <= 'Z':
			return bad(fmt.Sprintf("it has the upper-case letter %q (write it in lower case)", c))
		default:
			return bad(fmt.Sprintf("it has the character %q", c))
		}
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return bad("it does not start and end with a letter or a digit")
	}
	return nil
}
