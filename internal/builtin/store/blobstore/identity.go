package blobstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

// probesDir holds the objects CheckWrite writes and removes.
const probesDir = "probes"

// Remote says the run is in a bucket: workers on other machines can write
// its transcripts themselves.
func (r *Run) Remote() bool { return true }

// CheckWrite checks that this machine's identity may write and remove
// objects of the run, the way a worker writes transcripts: it writes a
// small object under probes/ and removes it. The error names the bucket,
// the identity the cloud's chain found here (Identity) and the role it
// needs.
func (r *Run) CheckWrite(ctx context.Context) error {
	name := probesDir + "/" + randomHex(8) + ".probe"
	if err := r.s.put(ctx, "writing", r.key(name), []byte("mst\n"), nil, nil); err != nil {
		return r.refused("writing a test object", err)
	}
	if err := r.s.remove(ctx, r.key(name)); err != nil && code(err) != gcerrors.NotFound {
		return r.refused("removing a test object", err)
	}
	return nil
}

func (r *Run) refused(doing string, err error) error {
	where := r.Location()
	if code(err) == gcerrors.PermissionDenied {
		return fmt.Errorf("%s: %s: the bucket refused %s (%w); %s", where, doing, Identity(where), err, credentialsHint(where))
	}
	return describe(where, doing, err)
}

// Identity says, in words, which identity the cloud's credential chain
// uses on this machine for a store at where (gs://… or s3://…), without
// any secret: the service account of a key file, an AWS profile, or the
// machine's default.
func Identity(where string) string {
	switch {
	case strings.HasPrefix(where, "gs://"):
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			return "the emulator's anonymous identity (STORAGE_EMULATOR_HOST=" + h + ")"
		}
		if f := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); f != "" {
			if who, err := keyFileIdentity(f); err == nil {
				return who + " (GOOGLE_APPLICATION_CREDENTIALS=" + f + ")"
			}
			return "the credentials of GOOGLE_APPLICATION_CREDENTIALS=" + f
		}
		return "this machine's application default credentials (gcloud auth application-default login, or the machine's service account)"
	case strings.HasPrefix(where, "s3://"):
		if p := os.Getenv("AWS_PROFILE"); p != "" {
			return "the AWS profile " + p
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") != "" {
			return "the access key in AWS_ACCESS_KEY_ID"
		}
		return "this machine's AWS default chain (its default profile, or its instance or pod role)"
	}
	return "this machine's credentials"
}

// keyFileIdentity reads who a Google credentials file is: the
// client_email of a service account key, or the kind of other files.
func keyFileIdentity(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var f struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return "", err
	}
	switch {
	case f.ClientEmail != "":
		return "the service account " + f.ClientEmail, nil
	case f.Type != "":
		return "the " + strings.ReplaceAll(f.Type, "_", " ") + " credentials", nil
	}
	return "", errors.New("no identity in the file")
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// code is gcerrors.Code, except that a refusal reads as PermissionDenied
// on every cloud: gocloud's GCS driver reports Google's 403 as NotFound,
// which would make a refused read look like a missing run or transcript
// (and a resume run those trials again).
func code(err error) gcerrors.ErrorCode {
	var ge *googleapi.Error
	if errors.As(err, &ge) && (ge.Code == http.StatusForbidden || ge.Code == http.StatusUnauthorized) {
		return gcerrors.PermissionDenied
	}
	return gcerrors.Code(err)
}
