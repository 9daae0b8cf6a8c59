package remote

import (
	"context"
	"time"

	"gocloud.dev/blob"
)

// The drivers live in packages that import this one, so the tests of this
// package cannot import them; main_ext_test.go (package remote_test, in
// the same test binary) can, and hands them over through RunTests before
// any test runs. They are set once and only read after.
var (
	// testDrivers are every driver (graft/remote/drivers.All).
	testDrivers []Driver
	// openFile opens graft/remote/file's store in a folder.
	openFile func(dir string) (FileStoreForTest, error)
	// newS3Store is graft/remote/s3.NewStore.
	newS3Store func(*blob.Bucket) Store
)

// TestDrivers are the drivers RunTests hands to the tests.
type TestDrivers struct {
	All      []Driver
	OpenFile func(dir string) (FileStoreForTest, error)
	S3Store  func(*blob.Bucket) Store
}

// FileStoreForTest is what the tests use of graft/remote/file.Store.
type FileStoreForTest interface {
	Store
	Dir() string
	Sweep(ctx context.Context, age time.Duration) (int, error)
}

// fileStoreForTest is FileStoreForTest, by the name the tests use.
type fileStoreForTest = FileStoreForTest

// openFileStore opens a file:// store in dir.
func openFileStore(dir string) (FileStoreForTest, error) { return openFile(dir) }

// tempPrefix starts the name of every temporary file of a file:// store.
const tempPrefix = ".tmp-"
