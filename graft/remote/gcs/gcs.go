// Package gcs is the gs:// remote driver: Google Cloud Storage through
// gocloud.dev/blob/gcsblob (untested here: no emulator in the test suite).
//
//	gs://bucket?prefix=folder/
//
// Credentials come from GOOGLE_APPLICATION_CREDENTIALS, gcloud's
// application default credentials or an emulator's environment; a URL
// with none of them is refused, unless it says metadata=true to let the
// SDK ask the GCE metadata server.
package gcs

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"

	_ "gocloud.dev/blob/gcsblob" // registers its opener on blob.DefaultURLMux, which the driver forwards to

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/internal/blobstore"
)

// Scheme is the URL scheme Driver opens.
const Scheme = "gs"

// Driver opens gs:// remote URLs.
type Driver struct{}

var _ remote.Driver = Driver{}

// Schemes implements remote.Driver.
func (Driver) Schemes() []string { return []string{Scheme} }

// Open implements remote.Driver.
func (Driver) Open(ctx context.Context, u *url.URL) (remote.Store, error) {
	s, err := blobstore.Open(ctx, u, blobstore.URL{Opener: blobstore.GuardedDefault{
		Found: found,
		Refused: errors.New("no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS (or run gcloud auth application-default login), " +
			"or add metadata=true to the remote URL to take them from the GCE metadata server"),
	}})
	if err != nil {
		return nil, err // a *blobstore.Store nil must not become a non-nil remote.Store
	}
	return s, nil
}

// found reports whether the SDK will find credentials without the
// metadata server.
func found(q url.Values) bool {
	adc := filepath.Join(os.Getenv("HOME"), ".config", "gcloud", "application_default_credentials.json")
	if d := os.Getenv("CLOUDSDK_CONFIG"); d != "" {
		adc = filepath.Join(d, "application_default_credentials.json")
	}
	_, err := os.Stat(adc)
	return err == nil || q.Get("anonymous") == "true" ||
		blobstore.AnyEnv("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "STORAGE_EMULATOR_HOST_GRPC")
}
