package graft

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/echostore/echostore/graft/diskguard"
)

// status507 is an error with an HTTP status, as an S3 client reports one.
type status507 struct{}

func (status507) Error() string       { return "507 Insufficient Storage" }
func (status507) HTTPStatusCode() int { return 507 }

// TestIsStorageFull: what says "no room" is storage full (a full data dir,
// any ENOSPC, an object store's storage-full code or 507), and nothing else.
func TestIsStorageFull(t *testing.T) {
	for _, c := range []struct {
		err  error
		full bool
	}{
		{fmt.Errorf("commit: %w", ErrDiskFull), true},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("push: %w", &smithy.GenericAPIError{Code: "XMinioStorageFull", Message: "Storage backend has reached its minimum free drive threshold"}), true},
		{fmt.Errorf("push: %w", status507{}), true},
		{nil, false},
		{errors.New("no space"), false},
		{fmt.Errorf("push: %w", &smithy.GenericAPIError{Code: "SlowDown"}), false},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.EIO}, false},
	} {
		if got := IsStorageFull(c.err); got != c.full {
			t.Errorf("IsStorageFull(%v) = %v, want %v", c.err, got, c.full)
		}
	}
	if !errors.Is(ErrDiskFull, syscall.ENOSPC) || ErrDiskFull != diskguard.ErrFull {
		t.Fatal("ErrDiskFull must wrap ENOSPC and be the disk guard's error")
	}
}
