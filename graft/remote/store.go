package remote

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/echostore/echostore/internal/redact"
)

// Store is the object store a remote log lives in: a flat key space of
// immutable objects. Keys are checked with CheckKey; every method returns an
// error wrapping ErrBadKey for a bad key before touching the store.
// Implementations are safe for concurrent use.
type Store interface {
	// PutIfAbsent creates key with data only if key does not exist: the
	// fence of the remote log. If it exists, the store is left untouched and
	// the error wraps ErrExists. On success the object is durable and
	// visible in full to every reader; no reader ever sees part of it.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Put creates or replaces key with data, atomically and durably. Used
	// only for content-addressed or otherwise unique keys.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the whole object; a missing key wraps ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns n bytes of key from offset off (fewer only if the
	// object ends first); a missing key wraps ErrNotFound.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// List returns the objects whose keys start with prefix, in ascending
	// key order, at most limit of them (limit <= 0: all). A limit of at most
	// ListPageSize costs one request on every object store.
	List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the store's resources.
	Close() error
}

// ListPageSize is the largest List limit served by a single request.
const ListPageSize = 1000

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Open opens the store a remote URL names:
//
//	file:///abs/dir, file://./rel/dir   this package's own file store (FileStore)
//	s3://bucket?endpoint=…&region=…&use_path_style=true&disable_https=true
//	                                    S3 and S3-compatible servers (MinIO, Tigris, R2)
//	gs://bucket                         Google Cloud Storage (untested here)
//	azblob://container                  Azure Blob Storage (untested here)
//	mem://                              in-process memory, for tests
//
// An optional prefix inside a bucket is given with the query parameter
// prefix=some/folder/ on every scheme but file. Credentials come from the
// environment in each SDK's usual way; the cloud's instance metadata
// service (a non-loopback address) is asked for them only if the URL says
// so: imds=true on s3://, metadata=true on gs:// and azblob:// (without it,
// gs:// and azblob:// with no credentials in the environment are refused).
//
// Unknown schemes wrap ErrUnknownScheme and every other bad URL
// (unparsable, no bucket, a bad prefix, an unknown or bad parameter,
// credentials in the URL) ErrBadURL; both are reported before anything is
// created or contacted, and no error shows the URL's secrets (see
// internal/redact). Open creates nothing: a file store's folder is made by
// its first write.
func Open(ctx context.Context, rawURL string) (Store, error) {
	shown := redact.URL(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the whole URL, credentials and all: say
		// what is wrong without echoing it.
		return nil, fmt.Errorf("remote URL %s is not a valid URL (check its escaping): %w", shown, ErrBadURL)
	}
	if err := refuseCredentials(u); err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		dir, err := fileDir(u)
		if err != nil {
			return nil, fmt.Errorf("remote URL %s: %w", shown, err)
		}
		fs, err := OpenFileStore(dir)
		if err != nil {
			return nil, err // a *FileStore nil must not become a non-nil Store
		}
		return fs, nil
	case "s3", "gs", "azblob", "mem":
		bs, err := openBlob(ctx, u)
		if err != nil {
			return nil, err // a *BlobStore nil must not become a non-nil Store
		}
		return bs, nil
	case "":
		return nil, fmt.Errorf("remote URL %s has no scheme (want file://, s3://, gs://, azblob:// or mem://): %w", shown, ErrBadURL)
	default:
		return nil, fmt.Errorf("remote URL %s: scheme %q (want file, s3, gs, azblob or mem): %w", shown, u.Scheme, ErrUnknownScheme)
	}
}

// refuseCredentials refuses a URL that carries credentials, in its user part
// or in a query parameter: object-store credentials come from the SDK's
// standard environment (AWS_ACCESS_KEY_ID, GOOGLE_APPLICATION_CREDENTIALS,
// AZURE_STORAGE_KEY, …), never from a URL, which ends up in shell history,
// process lists and logs. The error names the offending part, not its value.
func refuseCredentials(u *url.URL) error {
	where := u.Scheme + "://" + u.Host
	if u.User != nil {
		return fmt.Errorf("remote URL %s…: credentials in the URL are refused; set them in the object store's standard environment: %w", redact.URL(where), ErrBadURL)
	}
	for name, vals := range u.Query() {
		if redact.SecretParam(name) {
			return fmt.Errorf("remote URL %s…: query parameter %q looks like a credential and is refused; set it in the object store's standard environment: %w", redact.URL(where), name, ErrBadURL)
		}
		for _, v := range vals {
			if nu, err := url.Parse(v); err != nil && strings.Contains(v, "@") || err == nil && nu.User != nil {
				return fmt.Errorf("remote URL %s…: query parameter %q holds credentials (user@) and is refused; set them in the object store's standard environment: %w", redact.URL(where), name, ErrBadURL)
			}
		}
	}
	return nil
}

// fileDir returns the directory of a file:// URL: file:///abs/dir is
// /abs/dir, file://./rel/dir and file://rel/dir are relative.
func fileDir(u *url.URL) (string, error) {
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("file URLs take no query, fragment or user: %w", ErrBadURL)
	}
	p := u.Path
	if u.Opaque != "" {
		return "", fmt.Errorf("file URL must be file://DIR: %w", ErrBadURL)
	}
	if u.Host != "" && u.Host != "localhost" {
		p = u.Host + p
	}
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("file URL names no directory: %w", ErrBadURL)
	}
	return p, nil
}

// ProbeKey is the key Probe reads. No object is ever stored there.
const ProbeKey = "echostore-probe"

// Probe checks that s can be reached and serves this client, with one
// cheap request (a GET of ProbeKey, which need not exist): nil if the store
// answers, found or not, and an error wrapping ErrUnavailable if it is
// unreachable, refuses the credentials or has no such bucket. A file store
// whose folder does not exist yet answers (it is made by the first write).
func Probe(ctx context.Context, s Store) error {
	_, err := s.Get(ctx, ProbeKey)
	switch {
	case err == nil, errors.Is(err, ErrNotFound):
		return nil
	case errors.Is(err, ErrUnavailable):
		return err
	}
	return fmt.Errorf("probe: %w: %w", ErrUnavailable, err)
}
