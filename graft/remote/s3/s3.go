// Package s3 is the s3:// remote driver: S3 and S3-compatible servers
// (MinIO, Tigris, R2) through gocloud.dev/blob/s3blob and the AWS SDK v2.
//
//	s3://bucket?endpoint=…&region=…&use_path_style=true&disable_https=true&prefix=folder/
//
// Each URL gets an S3 client of its own, so the options one URL sets stay
// in its bucket. Credentials come from the AWS SDK's usual chain (the
// environment, the shared files, web identity); the EC2 instance metadata
// service is asked only if the URL says imds=true. The SDK's response
// checksum validation defaults to when_required: every object the remote
// log reads carries its own checksums, verified on read.
package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/internal/blobstore"
)

// Scheme is the URL scheme Driver opens.
const Scheme = s3blob.Scheme

// Driver opens s3:// remote URLs.
type Driver struct{}

var _ remote.Driver = Driver{}

// Schemes implements remote.Driver.
func (Driver) Schemes() []string { return []string{Scheme} }

// Open implements remote.Driver. Besides prefix=, the URL's parameters are
// imds, response_checksum_validation, ssetype, kmskeyid, accelerate,
// disable_https, use_path_style (or s3ForcePathStyle) and those of
// gocloud.dev/aws.V2ConfigFromURLParams (region, endpoint, profile,
// anonymous, …), which refuses unknown ones.
func (Driver) Open(ctx context.Context, u *url.URL) (remote.Store, error) {
	s, err := blobstore.Open(ctx, u, blobstore.URL{Opener: opener{}, Errors: sdkErrors()})
	if err != nil {
		return nil, err // a *blobstore.Store nil must not become a non-nil remote.Store
	}
	return s, nil
}

// NewStore returns a remote.Store over a bucket opened on an S3 client of
// the caller's (s3blob.OpenBucket); the Store owns the bucket and closes it
// on Close.
func NewStore(b *blob.Bucket) remote.Store { return blobstore.New(b, sdkErrors()) }

// opener opens each URL with its own S3 client.
type opener struct{}

// The query parameters of an s3:// URL that this package reads itself; the
// rest go to gocloud.dev/aws.V2ConfigFromURLParams.
const (
	responseChecksumParam = "response_checksum_validation"
	imdsParam             = "imds" // imds=true: credentials may come from the EC2 metadata service
)

func (opener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
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

// sdkErrors says what the AWS SDK's errors mean to the store.
func sdkErrors() blobstore.Errors {
	return blobstore.Errors{
		Unavailable: unavailable,
		Canceled: func(err error) bool {
			var ce *aws.RequestCanceledError
			return errors.As(err, &ce)
		},
		RangePastEnd: func(err error) bool {
			var ae smithy.APIError
			return errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange"
		},
		Conflict: func(err error) bool {
			var ae smithy.APIError
			return errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict"
		},
	}
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

// unavailable decides whether err says that the store, not the object, is
// the problem: missing credentials, an S3 error code of unavailableCodes,
// an HTTP 5xx but 507, 401, 403 or 429. A full store is not unavailable.
func unavailable(err error) (unavailable, decided bool) {
	if errors.Is(err, errNoCredentials) {
		return true, true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if storageFullCodes[ae.ErrorCode()] {
			return false, true // full, not unavailable: the caller answers 507
		}
		if unavailableCodes[ae.ErrorCode()] {
			return true, true
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusInsufficientStorage {
		return false, true
	}
	if errors.As(err, &re) && (re.HTTPStatusCode() >= 500 || re.HTTPStatusCode() == http.StatusForbidden ||
		re.HTTPStatusCode() == http.StatusUnauthorized || re.HTTPStatusCode() == http.StatusTooManyRequests) {
		return true, true
	}
	return false, false
}
