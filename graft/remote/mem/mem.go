// Package mem is the mem:// remote driver: an object store in the memory
// of the process (gocloud.dev/blob/memblob), for tests and trials. Every
// Open makes a new, empty store; it ends with Close or the process.
//
//	mem://?prefix=folder/
package mem

import (
	"context"
	"net/url"

	"gocloud.dev/blob/memblob"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/internal/blobstore"
)

// Scheme is the URL scheme Driver opens.
const Scheme = memblob.Scheme

// Driver opens mem:// remote URLs, which name no bucket and no path.
type Driver struct{}

var _ remote.Driver = Driver{}

// Schemes implements remote.Driver.
func (Driver) Schemes() []string { return []string{Scheme} }

// Open implements remote.Driver.
func (Driver) Open(ctx context.Context, u *url.URL) (remote.Store, error) {
	s, err := blobstore.Open(ctx, u, blobstore.URL{Opener: &memblob.URLOpener{}, Bucketless: true})
	if err != nil {
		return nil, err // a *blobstore.Store nil must not become a non-nil remote.Store
	}
	return s, nil
}
