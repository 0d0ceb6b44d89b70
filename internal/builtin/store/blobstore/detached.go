package blobstore

import (
	"context"
	"fmt"
	"path"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/mst-eval/mst/store"
)

// The store keeps detached runs' records (store.DetachedRecords) under
// PREFIX/EVAL/detached/ID/, never cached by a reader on the way.

var _ store.DetachedRecords = (*Store)(nil)

func (s *Store) detachedKey(eval, id, name string) string {
	return s.EvalKey(eval, store.DetachedPath(id, name))
}

// DetachedWhere is the URL of a detached run's record.
func (s *Store) DetachedWhere(eval, id, name string) string {
	return s.URLOf(s.detachedKey(eval, id, name))
}

// PutDetached writes a detached run's record.
func (s *Store) PutDetached(ctx context.Context, eval, id, name string, data []byte) error {
	opts := &blob.WriterOptions{CacheControl: "no-store"}
	switch path.Ext(name) {
	case ".json":
		opts.ContentType = "application/json"
	case ".txt":
		opts.ContentType = "text/plain; charset=utf-8"
	default:
		opts.ContentType = "application/octet-stream"
	}
	return s.WriteObject(ctx, s.detachedKey(eval, id, name), data, opts)
}

// GetDetached reads a detached run's record, at most limit+1 bytes.
func (s *Store) GetDetached(ctx context.Context, eval, id, name string, limit int64) ([]byte, error) {
	data, err := s.ReadObject(ctx, s.detachedKey(eval, id, name), limit)
	if err != nil && gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return data, err
}

// HasDetached says whether a detached run's record is there.
func (s *Store) HasDetached(ctx context.Context, eval, id, name string) (bool, error) {
	return s.ObjectExists(ctx, s.detachedKey(eval, id, name))
}

// DetachedIDs lists the ids of eval's detached runs.
func (s *Store) DetachedIDs(ctx context.Context, eval string) ([]string, error) {
	prefix := s.detachedKey(eval, "", "")
	var ids []string
	err := s.ListObjects(ctx, &blob.ListOptions{Prefix: prefix, Delimiter: "/"}, func(obj *blob.ListObject) error {
		if obj.IsDir {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/"))
		}
		return nil
	})
	return ids, err
}
