package remote

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/echostore/echostore/redact"
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

// A Driver opens the stores of the URL schemes it names. Every driver lives
// in a package of its own under graft/remote (file, s3, gcs, azblob, mem),
// so that a program links only the object-store SDKs of the drivers it
// passes to Open; graft/remote/drivers lists every driver, for the binary. A
// Driver holds no state of its own between calls and is safe for concurrent
// use.
type Driver interface {
	// Schemes returns the URL schemes the driver opens ("s3", "gs", …).
	Schemes() []string
	// Open opens the store u names. Open (the function) has parsed u,
	// checked its scheme against Schemes and refused credentials in it.
	// Every bad URL wraps ErrBadURL and shows u only redacted (see
	// redact); a driver creates and contacts nothing to refuse
	// one. On error the Store is nil.
	Open(ctx context.Context, u *url.URL) (Store, error)
}

// UnknownSchemeError is the error of a remote URL whose scheme no driver
// given to Open opens. It wraps ErrUnknownScheme and ErrBadURL.
type UnknownSchemeError struct {
	// URL is the remote URL, redacted.
	URL string
	// Scheme is the URL's scheme.
	Scheme string
	// Available are the schemes of the drivers Open was given, in their
	// order.
	Available []string
}

func (e *UnknownSchemeError) Error() string {
	if len(e.Available) == 0 {
		return fmt.Sprintf("remote URL %s: scheme %q (no remote drivers are linked in)", e.URL, e.Scheme)
	}
	return fmt.Sprintf("remote URL %s: scheme %q (want %s)", e.URL, e.Scheme, orList(e.Available, ""))
}

// Unwrap returns ErrUnknownScheme and ErrBadURL.
func (e *UnknownSchemeError) Unwrap() []error { return []error{ErrUnknownScheme, ErrBadURL} }

// orList renders "a, b or c", each item followed by suffix.
func orList(items []string, suffix string) string {
	var b strings.Builder
	for i, it := range items {
		switch {
		case i == 0:
		case i == len(items)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(it + suffix)
	}
	return b.String()
}

// Open opens the store a remote URL names, with the first of drivers that
// opens its scheme. With every driver (graft/remote/drivers.All):
//
//	file:///abs/dir, file://./rel/dir   graft/remote/file: the module's own file store
//	s3://bucket?endpoint=…&region=…&use_path_style=true&disable_https=true
//	                                    graft/remote/s3: S3 and S3-compatible servers (MinIO, Tigris, R2)
//	gs://bucket                         graft/remote/gcs: Google Cloud Storage (untested here)
//	azblob://container                  graft/remote/azblob: Azure Blob Storage (untested here)
//	mem://                              graft/remote/mem: in-process memory, for tests
//
// An optional prefix inside a bucket is given with the query parameter
// prefix=some/folder/ on every scheme but file. Credentials come from the
// environment in each SDK's usual way; the cloud's instance metadata
// service (a non-loopback address) is asked for them only if the URL says
// so: imds=true on s3://, metadata=true on gs:// and azblob:// (without it,
// gs:// and azblob:// with no credentials in the environment are refused).
//
// A scheme none of drivers opens is an *UnknownSchemeError (wrapping
// ErrUnknownScheme and ErrBadURL) naming the schemes available; every
// other bad URL (unparsable, no bucket, a bad prefix, an unknown or bad
// parameter, credentials in the URL) wraps ErrBadURL; both are reported
// before anything is created or contacted, and no error shows the URL's
// secrets (see redact). Open creates nothing: a file store's
// folder is made by its first write.
func Open(ctx context.Context, rawURL string, drivers ...Driver) (Store, error) {
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
	var available []string
	for _, d := range drivers {
		for _, sc := range d.Schemes() {
			if u.Scheme != "" && sc == u.Scheme {
				s, err := d.Open(ctx, u)
				if err != nil {
					return nil, err // never a typed nil inside a non-nil Store
				}
				return s, nil
			}
			if !slices.Contains(available, sc) {
				available = append(available, sc)
			}
		}
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("remote URL %s has no scheme (want %s): %w", shown, orList(available, "://"), ErrBadURL)
	}
	return nil, &UnknownSchemeError{URL: shown, Scheme: u.Scheme, Available: available}
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
