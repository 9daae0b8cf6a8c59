// Package blobstore is the remote.Store over a gocloud.dev/blob bucket that
// the bucket drivers share (graft/remote/s3, gcs, azblob, mem): the checks
// of a bucket URL, the conditional create, the mapping of a driver's errors
// to remote.ErrNotFound, remote.ErrExists and remote.ErrUnavailable. It
// imports no cloud SDK; what an SDK's errors mean comes from the driver, in
// Errors.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/redact"
)

// Errors says what the errors of a driver's SDK mean, beyond what
// gocloud.dev/gcerrors and the network errors of the standard library say.
// A nil field answers false.
type Errors struct {
	// Unavailable is asked first: decided is true if err is known to say
	// that the store, not the object, is (or is not) the problem.
	Unavailable func(err error) (unavailable, decided bool)
	// Canceled reports an SDK's own error for a request the caller gave
	// up (not the store's fault); asked after the network errors.
	Canceled func(err error) bool
	// RangePastEnd reports the answer to a ranged read that starts past
	// the end of the object (416 on S3): an empty read, not an error.
	RangePastEnd func(err error) bool
	// Conflict reports a conditional create the server asks the client to
	// retry (409 ConditionalRequestConflict on S3).
	Conflict func(err error) bool
}

func ask(f func(error) bool, err error) bool { return f != nil && f(err) }

// Store is a remote.Store over a gocloud.dev/blob bucket. PutIfAbsent is a
// conditional write (blob.WriterOptions.IfNotExist: If-None-Match: * on
// S3, DoesNotExist on GCS, If-None-Match on Azure); the server decides
// which of two concurrent creates wins.
type Store struct {
	b      *blob.Bucket
	errs   Errors
	closed atomic.Bool
}

var _ remote.Store = (*Store)(nil)

// New returns a Store over an open bucket, whose driver's errors mean what
// errs says; the Store owns the bucket and closes it on Close.
func New(b *blob.Bucket, errs Errors) *Store { return &Store{b: b, errs: errs} }

// URL says how Open treats a bucket URL.
type URL struct {
	// Opener opens the bucket u names; u still holds every parameter
	// (prefix= is applied by Open).
	Opener blob.BucketURLOpener
	// Bucketless: the URL names no bucket and no path (mem://).
	Bucketless bool
	// Errors is passed to New.
	Errors Errors
}

// Open checks the bucket URL u and opens it with how.Opener; every failure
// wraps remote.ErrBadURL and shows the URL redacted.
func Open(ctx context.Context, u *url.URL, how URL) (*Store, error) {
	shown := redact.URL(u.String())
	if !how.Bucketless && u.Host == "" {
		return nil, fmt.Errorf("remote URL %s names no bucket (want %s://BUCKET…): %w", shown, u.Scheme, remote.ErrBadURL)
	}
	if how.Bucketless && (u.Host != "" || (u.Path != "" && u.Path != "/")) {
		return nil, fmt.Errorf("remote URL %s: a %s:// URL names no bucket or path: %w", shown, u.Scheme, remote.ErrBadURL)
	}
	if u.Opaque != "" || u.Fragment != "" {
		return nil, fmt.Errorf("remote URL %s: want %s://BUCKET?parameters, without a path or fragment: %w", shown, u.Scheme, remote.ErrBadURL)
	}
	if !how.Bucketless && u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("remote URL %s: a bucket URL takes no path (%q); give a folder inside the bucket with prefix=folder/: %w", shown, u.Path, remote.ErrBadURL)
	}
	if u.Query().Has("key") {
		// gocloud would turn the whole store into that one object.
		return nil, fmt.Errorf("remote URL %s: parameter key is not supported (give a folder with prefix=folder/): %w", shown, remote.ErrBadURL)
	}
	if p := u.Query().Get("prefix"); p != "" {
		if err := remote.CheckPrefix(p); err != nil || p[len(p)-1] != '/' {
			return nil, fmt.Errorf("remote URL %s: prefix=%q must be a key prefix ending in '/' (segments of letters, digits and -_. , no \"..\"): %w", shown, p, remote.ErrBadURL)
		}
	}
	// A mux of its own per URL: nothing is registered anywhere else.
	mux := new(blob.URLMux)
	mux.RegisterBucket(u.Scheme, how.Opener)
	b, err := mux.OpenBucketURL(ctx, u)
	if err != nil {
		// The driver's message may quote the URL: only its redacted form.
		msg := strings.ReplaceAll(err.Error(), u.String(), shown)
		return nil, fmt.Errorf("remote URL %s: %s: %w", shown, msg, remote.ErrBadURL)
	}
	return New(b, how.Errors), nil
}

// mapErr wraps err with remote.ErrNotFound when the driver says so, and
// with remote.ErrUnavailable when the store could not be reached or
// refused to serve. A missing bucket is unavailable, not "not found": its
// objects may well exist once the URL is right.
func (s *Store) mapErr(op, key string, err error) error {
	if s.unavailable(err) {
		return fmt.Errorf("%s %s: %w: %w", op, key, remote.ErrUnavailable, err)
	}
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%s %s: %w (%v)", op, key, remote.ErrNotFound, err)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// unavailable reports whether err says that the store, not the object, is
// the problem: what the driver's Errors.Unavailable decides (an S3 error
// code, an HTTP 5xx but 507, missing credentials, …), a closed store, a
// permission refusal, the network (refused, reset, DNS, timeout). A full
// store is not unavailable.
func (s *Store) unavailable(err error) bool {
	if errors.Is(err, errStoreClosed) {
		return true
	}
	if s.errs.Unavailable != nil {
		if v, decided := s.errs.Unavailable(err); decided {
			return v
		}
	}
	if c := gcerrors.Code(err); c == gcerrors.PermissionDenied || c == gcerrors.ResourceExhausted || c == gcerrors.DeadlineExceeded {
		return true
	}
	var ne net.Error
	var de *net.DNSError
	var oe *net.OpError
	switch {
	case errors.As(err, &de), errors.As(err, &oe), errors.As(err, &ne):
		return true
	case ask(s.errs.Canceled, err), errors.Is(err, context.Canceled):
		return false // the caller gave up: not the store's fault
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var retry interface{ RetryableError() bool }
	return errors.As(err, &retry) && retry.RetryableError()
}

// mapCreateErr maps the error of a conditional create: the failed
// precondition (412 on S3) wraps remote.ErrExists.
func (s *Store) mapCreateErr(key string, err error) error {
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("put %s: %w (%v)", key, remote.ErrExists, err)
	}
	return s.mapErr("put", key, err)
}

// conflictRetries bounds the retries of a conditional create that the
// server answered with a conflict (another conditional write to the key
// was in flight; S3 asks the client to retry, and the retry then succeeds
// or fails with 412).
const conflictRetries = 5

// PutIfAbsent implements remote.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := remote.CheckKey(key); err != nil {
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
		if err == nil || !ask(s.errs.Conflict, err) {
			break
		}
	}
	if err != nil {
		return s.mapCreateErr(key, err)
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

// Put implements remote.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := remote.CheckKey(key); err != nil {
		return err
	}
	if err := s.b.WriteAll(ctx, key, data, writerOptions(len(data), false)); err != nil {
		return s.mapErr("put", key, err)
	}
	return nil
}

// Get implements remote.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := remote.CheckKey(key); err != nil {
		return nil, err
	}
	b, err := s.b.ReadAll(ctx, key)
	if err != nil {
		return nil, s.mapErr("get", key, err)
	}
	return b, nil
}

// GetRange implements remote.Store with one ranged GET.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := remote.CheckKey(key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get %s: range at %d of %d bytes: %w", key, off, n, remote.ErrInvalid)
	}
	if n == 0 {
		return []byte{}, nil
	}
	r, err := s.b.NewRangeReader(ctx, key, off, n, nil)
	if err != nil {
		if ask(s.errs.RangePastEnd, err) {
			return []byte{}, nil // the object ends before off
		}
		return nil, s.mapErr("get", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, s.mapErr("get", key, err)
	}
	return b, nil
}

// List implements remote.Store; a limit of at most remote.ListPageSize is
// one request.
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]remote.ObjectInfo, error) {
	if err := remote.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	var out []remote.ObjectInfo
	token := blob.FirstPageToken
	for {
		size := remote.ListPageSize
		if limit > 0 {
			size = min(size, limit-len(out))
		}
		page, next, err := s.b.ListPage(ctx, token, size, &blob.ListOptions{Prefix: prefix})
		if err != nil {
			return nil, s.mapErr("list", prefix, err)
		}
		for _, o := range page {
			if o.IsDir {
				continue
			}
			out = append(out, remote.ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
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

// Delete implements remote.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := remote.CheckKey(key); err != nil {
		return err
	}
	if err := s.b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return s.mapErr("delete", key, err)
	}
	return nil
}

// Close implements remote.Store.
func (s *Store) Close() error {
	s.closed.Store(true)
	return s.b.Close()
}
