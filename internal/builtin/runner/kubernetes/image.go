package kubernetes

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// podStatus is the part of a pod's JSON (what kubectl wait --output json
// prints once the pod is Ready) that says which image each container runs.
type podStatus struct {
	Status struct {
		ContainerStatuses []struct {
			Name    string `json:"name"`
			Image   string `json:"image"`
			ImageID string `json:"imageID"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// digestSyntax is an OCI content digest: ALGORITHM:ENCODED, such as
// sha256: and 64 hex digits.
var digestSyntax = regexp.MustCompile(`^[a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$`)

// scheme is the prefix some runtimes put before an imageID
// (docker-pullable://, docker://).
var scheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)

// containerDigest reads, from a pod's JSON, the digest of the image the
// container named container runs, from its status's imageID. A kubelet
// writes imageID as the runtime reports it: NAME@sha256:… for an image
// pulled from a registry (containerd, CRI-O), sometimes after a scheme
// (docker-pullable://), or sha256:… alone, the image's own id, for an
// image that came from no registry. The digest is "" when the status has
// none, as on a cluster without real kubelets (kwok); imageID, then, is
// what the status said, for a message.
func containerDigest(out []byte, container string) (digest, imageID string, err error) {
	var p podStatus
	if err := json.Unmarshal(out, &p); err != nil {
		return "", "", fmt.Errorf("reading the pod's status: %w", err)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != container {
			continue
		}
		id := scheme.ReplaceAllString(c.ImageID, "")
		if i := strings.LastIndex(id, "@"); i >= 0 {
			id = id[i+1:]
		}
		if digestSyntax.MatchString(id) {
			return id, c.ImageID, nil
		}
		return "", c.ImageID, nil
	}
	return "", "", nil
}

// pinnedImage is what run.json records of a pod's image: the reference it
// was created with, pinned by the digest the cluster reported
// (NAME@DIGEST, any digest in the reference replaced), or the reference
// as given when there is no digest.
func pinnedImage(ref, digest string) string {
	if digest == "" {
		return ref
	}
	name, _, _ := strings.Cut(ref, "@")
	return name + "@" + digest
}
