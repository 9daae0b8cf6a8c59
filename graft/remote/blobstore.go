package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers its opener on blob.DefaultURLMux, which azblob:// forwards to
	_ "gocloud.dev/blob/gcsblob"   // registers its opener on blob.DefaultURLMux, which gs:// forwards to
	"gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/echostore/echostore/internal/redact"
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

// freshS3 opens each URL with its own S3 client: the options a URL sets
// stay in its bucket.
type freshS3 struct{}

// The query parameters of an s3:// URL that this package reads itself; the
// rest go to gocloud.dev/aws.V2ConfigFromURLParams (region, endpoint,
// profile, anonymous, …), which refuses unknown ones.
const (
	responseChecksumParam = "response_checksum_validation"
	imdsParam             = "imds" // imds=true: credentials may come from the EC2 metadata service
)

func (freshS3) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	q.Del("prefix") // applied by blob.URLMux
	if !q.Has(responseChecksumParam) {
		// Every object we read carries its own checksums, verified on
		// read; the SDK's "when_supported" default logs a line for every
		// ranged GET, which has no full-object checksum to validate.
		q.Set(responseChecksumParam, "when_required")
	}
	boolParam := func(key string) (bool, error) {
		v := q.Get(key)
		q.Del(key)
		if v == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s=%q: want true or false", key, v)
		}
		return b, nil
	}
	imds, err := boolParam(imdsParam)
	if err != nil {
		return nil, err
	}
	var opts s3blob.Options
	if v := q.Get("ssetype"); v != "" {
		q.Del("ssetype")
		for _, t := range types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				opts.EncryptionType = t
			}
		}
		if opts.EncryptionType == "" {
			return nil, fmt.Errorf("ssetype=%q: want one of %v", v, types.ServerSideEncryptionAes256.Values())
		}
	}
	if v := q.Get("kmskeyid"); v != "" {
		q.Del("kmskeyid")
		opts.KMSEncryptionID = v
	}
	accelerate, err := boolParam("accelerate")
	if err != nil {
		return nil, err
	}
	noHTTPS, err := boolParam("disable_https")
	if err != nil {
		return nil, err
	}
	pathStyle, err := boolParam("use_path_style")
	if err != nil {
		return nil, err
	}
	legacyPathStyle, err := boolParam("s3ForcePathStyle")
	if err != nil {
		return nil, err
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	if !imds && aws.IsCredentialsProvider(cfg.Credentials, (*ec2rolecreds.Provider)(nil)) {
		// The SDK's chain found nothing in the environment or the shared
		// files and would ask the EC2 metadata service (169.254.169.254)
		// on the first request: not unless the URL says so.
		cfg.Credentials = noCredentials{}
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UseAccelerate = accelerate
		o.EndpointOptions.DisableHTTPS = noHTTPS
		o.UsePathStyle = pathStyle || legacyPathStyle
	})
	opts.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	return s3blob.OpenBucket(ctx, client, u.Host, &opts)
}

// errNoCredentials: an s3:// remote found no credentials.
var errNoCredentials = errors.New("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
	"(or AWS_PROFILE, AWS_WEB_IDENTITY_TOKEN_FILE), or add imds=true to the remote URL to take them from the EC2 instance metadata service")

// noCredentials is the credential provider of an s3:// remote that found
// none and may not ask the metadata service.
type noCredentials struct{}

func (noCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errNoCredentials
}

// viaDefault forwards to the opener that a gocloud driver registered on
// blob.DefaultURLMux when imported (gcsblob and azureblob keep their
// credential-loading openers unexported), once metadataGuard allows it.
type viaDefault struct{}

func (viaDefault) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	u, err := metadataGuard(u)
	if err != nil {
		return nil, err
	}
	return blob.DefaultURLMux().OpenBucketURL(ctx, u)
}

// metadataParam (metadata=true) lets a gs:// or azblob:// remote take its
// credentials from the cloud's instance metadata service (169.254.169.254,
// metadata.google.internal), as imdsParam does for s3://.
const metadataParam = "metadata"

// metadataGuard refuses a gs:// or azblob:// URL whose SDK would find no
// credentials in the environment and fall back to the cloud's metadata
// service (a non-loopback address, probed at open or on the first
// request), unless the URL says metadata=true. It returns u without that
// parameter.
func metadataGuard(u *url.URL) (*url.URL, error) {
	q := u.Query()
	allow := false
	if v := q.Get(metadataParam); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", metadataParam, v)
		}
		allow = b
	}
	if q.Has(metadataParam) {
		q.Del(metadataParam)
		c := *u
		c.RawQuery = q.Encode()
		u = &c
	}
	env := func(keys ...string) bool {
		for _, k := range keys {
			if os.Getenv(k) != "" {
				return true
			}
		}
		return false
	}
	switch {
	case allow:
		return u, nil
	case u.Scheme == "gs":
		adc := filepath.Join(os.Getenv("HOME"), ".config", "gcloud", "application_default_credentials.json")
		if d := os.Getenv("CLOUDSDK_CONFIG"); d != "" {
			adc = filepath.Join(d, "application_default_credentials.json")
		}
		if _, err := os.Stat(adc); err == nil || q.Get("anonymous") == "true" ||
			env("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "STORAGE_EMULATOR_HOST_GRPC") {
			return u, nil
		}
		return nil, errors.New("no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS (or run gcloud auth application-default login), " +
			"or add metadata=true to the remote URL to take them from the GCE metadata server")
	case u.Scheme == "azblob":
		if env("AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING",
			"AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_STORAGE_IS_LOCAL_EMULATOR") {
			return u, nil
		}
		return nil, errors.New("no Azure credentials: set AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or " +
			"AZURE_STORAGE_CONNECTION_STRING (or AZURE_CLIENT_ID with AZURE_CLIENT_SECRET), or add metadata=true to the remote URL " +
			"to let the SDK ask the Azure instance metadata service (managed identity) and the az CLI")
	}
	return u, nil
}

func newMux() *blob.URLMux {
	mux := new(blob.URLMux)
	mux.RegisterBucket(s3blob.Scheme, freshS3{})
	mux.RegisterBucket(memblob.Scheme, &memblob.URLOpener{})
	mux.RegisterBucket("gs", viaDefault{})
	mux.RegisterBucket("azblob", viaDefault{})
	return mux
}

// openBlob opens a bucket URL; every failure wraps ErrBadURL and shows the
// URL redacted.
func openBlob(ctx context.Context, u *url.URL) (*BlobStore, error) {
	shown := redact.URL(u.String())
	if u.Scheme != "mem" && u.Host == "" {
		return nil, fmt.Errorf("remote URL %s names no bucket (want %s://BUCKET…): %w", shown, u.Scheme, ErrBadURL)
	}
	if u.Scheme == "mem" && (u.Host != "" || (u.Path != "" && u.Path != "/")) {
		return nil, fmt.Errorf("remote URL %s: a mem:// URL names no bucket or path: %w", shown, ErrBadURL)
	}
	if u.Opaque != "" || u.Fragment != "" {
		return nil, fmt.Errorf("remote URL %s: want %s://BUCKET?parameters, without a path or fragment: %w", shown, u.Scheme, ErrBadURL)
	}
	if u.Scheme != "mem" && u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("remote URL %s: a bucket URL takes no path (%q); give a folder inside the bucket with prefix=folder/: %w", shown, u.Path, ErrBadURL)
	}
	if u.Query().Has("key") {
		// gocloud would turn the whole store into that one object.
		return nil, fmt.Errorf("remote URL %s: parameter key is not supported (give a folder with prefix=folder/): %w", shown, ErrBadURL)
	}
	if p := u.Query().Get("prefix"); p != "" {
		if err := checkPrefix(p); err != nil || p[len(p)-1] != '/' {
			return nil, fmt.Errorf("remote URL %s: prefix=%q must be a key prefix ending in '/' (segments of letters, digits and -_. , no \"..\"): %w", shown, p, ErrBadURL)
		}
	}
	b, err := newMux().OpenBucketURL(ctx, u)
	if err != nil {
		// The driver's message may quote the URL: only its redacted form.
		msg := strings.ReplaceAll(err.Error(), u.String(), shown)
		return nil, fmt.Errorf("remote URL %s: %s: %w", shown, msg, ErrBadURL)
	}
	return &BlobStore{b: b}, nil
}

// mapBlobErr wraps err with ErrNotFound when the driver says so, and with
// ErrUnavailable when the store could not be reached or refused to serve.
// A missing bucket is unavailable, not "not found": its objects may well
// exist once the URL is right.
func mapBlobErr(op, key string, err error) error {
	if unavailable(err) {
		return fmt.Errorf("%s %s: %w: %w", op, key, ErrUnavailable, err)
	}
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%s %s: %w (%v)", op, key, ErrNotFound, err)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// unavailableCodes are the S3 error codes of a store that cannot serve now
// or refuses this client, whatever the object.
var unavailableCodes = map[string]bool{
	"NoSuchBucket": true, "SlowDown": true, "ServiceUnavailable": true, "InternalError": true,
	"RequestTimeout": true, "RequestTimeTooSkewed": true, "AccessDenied": true, "Forbidden": true,
	"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "ExpiredToken": true,
	"InvalidToken": true, "TokenRefreshRequired": true, "AllAccessDisabled": true,
	"AccountProblem": true, "XMinioServerNotInitialized": true,
}

// storageFullCodes are the S3 error codes of a store that is full: not
// unavailable (a full store is answered with 507, not 503).
var storageFullCodes = map[string]bool{"XMinioStorageFull": true, "StorageFull": true, "InsufficientStorage": true}

// unavailable reports whether err says that the store, not the object, is
// the problem: the network (refused, reset, DNS, timeout), an HTTP 5xx but
// 507, an S3 error code of unavailableCodes, missing credentials, a
// permission refusal. A full store is not unavailable.
func unavailable(err error) bool {
	if errors.Is(err, errNoCredentials) || errors.Is(err, errStoreClosed) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if storageFullCodes[ae.ErrorCode()] {
			return false // full, not unavailable: the caller answers 507
		}
		if unavailableCodes[ae.ErrorCode()] {
			return true
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusInsufficientStorage {
		return false
	}
	if errors.As(err, &re) && (re.HTTPStatusCode() >= 500 || re.HTTPStatusCode() == http.StatusForbidden ||
		re.HTTPStatusCode() == http.StatusUnauthorized || re.HTTPStatusCode() == http.StatusTooManyRequests) {
		return true
	}
	if c := gcerrors.Code(err); c == gcerrors.PermissionDenied || c == gcerrors.ResourceExhausted || c == gcerrors.DeadlineExceeded {
		return true
	}
	var ne net.Error
	var de *net.DNSError
	var oe *net.OpError
	var ce *aws.RequestCanceledError
	switch {
	case errors.As(err, &de), errors.As(err, &oe), errors.As(err, &ne):
		return true
	case errors.As(err, &ce), errors.Is(err, context.Canceled):
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
