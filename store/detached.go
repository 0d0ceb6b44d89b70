package store

import (
	"context"
	"path"
)

// DetachedRecords is what a store that can hold detached runs gives them:
// for each detached run of an eval, a few small named records (its
// status, its log, its cancel marker) kept beside the eval's runs, at
// DetachedPath under the eval's folder. A store on a local folder holds
// no detached runs: the machine that runs one reaches only a bucket.
//
// Every call is bounded as the store's other calls are: a store that stops
// answering fails it wrapping ErrUnavailable.
type DetachedRecords interface {
	// DetachedWhere says where the record name of the detached run id of
	// eval is, for people (a URL); an empty name names the run's folder,
	// and an empty id the folder of every detached run of eval.
	DetachedWhere(eval, id, name string) string
	// PutDetached writes a record, replacing what was there.
	PutDetached(ctx context.Context, eval, id, name string, data []byte) error
	// GetDetached reads a record: at most limit+1 bytes of it, so a
	// caller tells a record longer than limit. A record that is not there
	// fails wrapping ErrNotFound.
	GetDetached(ctx context.Context, eval, id, name string, limit int64) ([]byte, error)
	// HasDetached says whether a record is there.
	HasDetached(ctx context.Context, eval, id, name string) (bool, error)
	// DetachedIDs lists the ids of eval's detached runs, in no order.
	DetachedIDs(ctx context.Context, eval string) ([]string, error)
}

// detachedDir is the folder of an eval's detached runs, beside runsDir.
const detachedDir = "detached"

// DetachedPath is where, under an eval's folder, the record name of the
// detached run id is: detached/ID/NAME. An empty name gives the run's
// folder, with a trailing slash, and an empty id the folder of every
// detached run.
func DetachedPath(id, name string) string {
	if id == "" {
		return detachedDir + "/"
	}
	if name == "" {
		return path.Join(detachedDir, id) + "/"
	}
	return path.Join(detachedDir, id, name)
}
