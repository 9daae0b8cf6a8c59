// Package drivers lists every remote driver of the module, for a program that
// opens any remote URL (the echostore binary, the benchmarks, tests). A
// program that needs fewer passes only those drivers to remote.Open and
// links only their SDKs.
package drivers

import (
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/azblob"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/graft/remote/gcs"
	"github.com/echostore/echostore/graft/remote/mem"
	"github.com/echostore/echostore/graft/remote/s3"
)

// All returns every remote driver: file://, s3://, gs://, azblob:// and
// mem://, in that order (the order an unknown scheme's error lists them).
func All() []remote.Driver {
	return []remote.Driver{file.Driver{}, s3.Driver{}, gcs.Driver{}, azblob.Driver{}, mem.Driver{}}
}
