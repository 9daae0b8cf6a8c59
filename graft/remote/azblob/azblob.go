// Package azblob is the azblob:// remote driver: Azure Blob Storage
// through gocloud.dev/blob/azureblob (untested here: no emulator in the
// test suite).
//
//	azblob://container?prefix=folder/
//
// Credentials come from the environment (AZURE_STORAGE_ACCOUNT with
// AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or a connection string, or a
// service principal); a URL with none of them is refused, unless it says
// metadata=true to let the SDK ask the Azure instance metadata service
// (managed identity) and the az CLI.
package azblob

import (
	"context"
	"errors"
	"net/url"

	_ "gocloud.dev/blob/azureblob" // registers its opener on blob.DefaultURLMux, which the driver forwards to

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/internal/blobstore"
)

// Scheme is the URL scheme Driver opens.
const Scheme = "azblob"

// Driver opens azblob:// remote URLs.
type Driver struct{}

var _ remote.Driver = Driver{}

// Schemes implements remote.Driver.
func (Driver) Schemes() []string { return []string{Scheme} }

// Open implements remote.Driver.
func (Driver) Open(ctx context.Context, u *url.URL) (remote.Store, error) {
	s, err := blobstore.Open(ctx, u, blobstore.URL{Opener: blobstore.GuardedDefault{
		Found: func(url.Values) bool {
			return blobstore.AnyEnv("AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING",
				"AZURE_STORAGEBLOB_CONNECTIONSTRING", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
				"AZURE_FEDERATED_TOKEN_FILE", "AZURE_STORAGE_IS_LOCAL_EMULATOR")
		},
		Refused: errors.New("no Azure credentials: set AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or " +
			"AZURE_STORAGE_CONNECTION_STRING (or AZURE_CLIENT_ID with AZURE_CLIENT_SECRET), or add metadata=true to the remote URL " +
			"to let the SDK ask the Azure instance metadata service (managed identity) and the az CLI"),
	}})
	if err != nil {
		return nil, err // a *blobstore.Store nil must not become a non-nil remote.Store
	}
	return s, nil
}
