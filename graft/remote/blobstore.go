package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync/atomic"

	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers its opener on blob.DefaultURLMux, which azblob:// forwards to
	_ "gocloud.dev/blob/gcsblob"   // registers its opener on blob.DefaultURLMux, which gs:// forwards to
	"gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// BlobStore is a Store over a gocloud.dev/blob bucket: S3 and S3-compatible
// servers, Google Cloud Storage, Azure Blob Storage, memory. PutIfAbsent is
// a conditional write (blob.WriterOptions.IfNotExist: If-None-Match: * on
// S3, DoesNotExist on GCS, If-None-Match on Azure); the server decides which
// of two concurrent creates wins.
type BlobStore struct {
	b      *blob.Bucket
	closed atomic.Bool
}

var _ Store = (*BlobStore)(nil)

// NewBlobStore returns a Store over an open bucket; the Store owns it and
// closes it on Close.
func NewBlobStore(b *blob.Bucket) *BlobStore { return &BlobStore{b: b} }

// freshS3 opens each URL with a new s3blob.URLOpener: that opener keeps
// URL-derived options in itself, so a shared one would leak them from one
// URL into the next.
type freshS3 struct{}

func (freshS3) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	if !q.Has(responseChecksumParam) {
		// Every object we read carries its own checksums, verified on
		// read; the SDK's "when_supported" default logs a line for every
		// ranged GET, which has no full-object checksum to validate.
		q.Set(responseChecksumParam, "when_required")
		c := *u
		c.RawQuery = q.Encode()
		u = &c
	}
	return (&s3blob.URLOpener{}).OpenBucketURL(ctx, u)
}

const responseChecksumParam = "response_checksum_validation"

// viaDefault forwards to the opener that a gocloud driver registered on
// blob.DefaultURLMux when imported (gcsblob and azureblob keep their
// credential-loading openers unexported).
type viaDefault struct{}

func (viaDefault) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	return blob.DefaultURLMux().OpenBucketURL(ctx, u)
}

func newMux() *blob.URLMux {
	mux := new(blob.URLMux)
	mux.RegisterBucket(s3blob.Scheme, freshS3{})
	mux.RegisterBucket(memblob.Scheme, &memblob.URLOpener{})
	mux.RegisterBucket("gs", viaDefault{})
	mux.RegisterBucket("azblob", viaDefault{})
	return mux
}

func openBlob(ctx context.Context, u *url.URL) (*BlobStore, error) {
	if u.Scheme != "mem" && u.Host == "" {
		return nil, fmt.Errorf("remote URL %s names no bucket: %w", u.Redacted(), ErrBadURL)
	}
	if p := u.Query().Get("prefix"); p != "" {
		if err := checkPrefix(p); err != nil || p[len(p)-1] != '/' {
			return nil, fmt.Errorf("remote URL %s: prefix must be a key prefix ending in '/': %w", u.Redacted(), ErrBadURL)
		}
	}
	b, err := newMux().OpenBucketURL(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("remote URL %s: %v: %w", u.Redacted(), err, ErrBadURL)
	}
	return &BlobStore{b: b}, nil
}

// mapBlobErr wraps err with ErrNotFound when the driver says so.
func mapBlobErr(op, key string, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%s %s: %w (%v)", op, key, ErrNotFound, err)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// mapCreateErr maps the error of a conditional create: the failed
// precondition (412 on S3) wraps ErrExists.
func mapCreateErr(key string, err error) error {
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("put %s: %w (%v)", key, ErrExists, err)
	}
	return mapBlobErr("put", key, err)
}

// conflictRetries bounds the retries of a conditional create that S3
// answered with 409 ConditionalRequestConflict (another conditional write to
// the key was in flight; S3 asks the client to retry, and the retry then
// succeeds or fails with 412).
const conflictRetries = 5

func isConditionalConflict(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict"
}

// PutIfAbsent implements Store.
func (s *BlobStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if s.closed.Load() {
		// gocloud reports a closed bucket as a failed precondition too;
		// never let that read as "exists".
		return fmt.Errorf("put %s: %w", key, errStoreClosed)
	}
	var err error
	for range conflictRetries {
		err = s.b.WriteAll(ctx, key, data, writerOptions(len(data), true))
		if err == nil || !isConditionalConflict(err) {
			break
		}
	}
	if err != nil {
		return mapCreateErr(key, err)
	}
	return nil
}

var errStoreClosed = errors.New("remote: store closed")

// writerOptions makes every write a single request (no multipart upload),
// so that a conditional create is one atomic request on every server.
func writerOptions(n int, ifNotExist bool) *blob.WriterOptions {
	return &blob.WriterOptions{
		ContentType:                 "application/octet-stream",
		DisableContentTypeDetection: true,
		BufferSize:                  max(n+1, 8<<20),
		IfNotExist:                  ifNotExist,
	}
}

// Put implements Store.
func (s *BlobStore) Put(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.b.WriteAll(ctx, key, data, writerOptions(len(data), false)); err != nil {
		return mapBlobErr("put", key, err)
	}
	return nil
}

// Get implements Store.
func (s *BlobStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	b, err := s.b.ReadAll(ctx, key)
	if err != nil {
		return nil, mapBlobErr("get", key, err)
	}
	return b, nil
}

// GetRange implements Store with one ranged GET.
func (s *BlobStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, invalid("get %s: range at %d of %d bytes", key, off, n)
	}
	if n == 0 {
		return []byte{}, nil
	}
	r, err := s.b.NewRangeReader(ctx, key, off, n, nil)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
			return []byte{}, nil // the object ends before off (416 on S3)
		}
		return nil, mapBlobErr("get", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, mapBlobErr("get", key, err)
	}
	return b, nil
}

// List implements Store; a limit of at most ListPageSize is one request.
func (s *BlobStore) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	var out []ObjectInfo
	token := blob.FirstPageToken
	for {
		size := ListPageSize
		if limit > 0 {
			size = min(size, limit-len(out))
		}
		page, next, err := s.b.ListPage(ctx, token, size, &blob.ListOptions{Prefix: prefix})
		if err != nil {
			return nil, mapBlobErr("list", prefix, err)
		}
		for _, o := range page {
			if o.IsDir {
				continue
			}
			out = append(out, ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
		}
		if len(next) == 0 || (limit > 0 && len(out) >= limit) {
			break
		}
		token = next
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Delete implements Store.
func (s *BlobStore) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return mapBlobErr("delete", key, err)
	}
	return nil
}

// Close implements Store.
func (s *BlobStore) Close() error {
	s.closed.Store(true)
	return s.b.Close()
}
