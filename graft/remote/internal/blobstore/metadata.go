package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"

	"gocloud.dev/blob"
)

// MetadataParam (metadata=true) lets a gs:// or azblob:// remote take its
// credentials from the cloud's instance metadata service (169.254.169.254,
// metadata.google.internal), as imds=true does for s3://.
const MetadataParam = "metadata"

// GuardedDefault is the opener of the gs:// and azblob:// drivers: it
// forwards to the opener that a gocloud driver package registers on
// blob.DefaultURLMux when imported (gcsblob and azureblob keep their
// credential-loading openers unexported), once the URL has passed the
// metadata guard. Found reports whether the environment holds credentials
// for the SDK of u's scheme; without them, and without metadata=true, the
// URL is refused rather than let the SDK fall back to the instance
// metadata service (a non-loopback address, probed at open or on the first
// request). Refused is the error then.
type GuardedDefault struct {
	Found   func(q url.Values) bool
	Refused error
}

// OpenBucketURL implements blob.BucketURLOpener.
func (g GuardedDefault) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	allow := false
	if v := q.Get(MetadataParam); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", MetadataParam, v)
		}
		allow = b
	}
	if q.Has(MetadataParam) {
		q.Del(MetadataParam)
		c := *u
		c.RawQuery = q.Encode()
		u = &c
	}
	if !allow && !g.Found(q) {
		return nil, g.Refused
	}
	return blob.DefaultURLMux().OpenBucketURL(ctx, u)
}

// AnyEnv reports whether any of the environment variables keys is set.
func AnyEnv(keys ...string) bool {
	for _, k := range keys {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}
