//go:build !linux

package diskguard

import "errors"

// fallocate is not available here: allocate writes zeros.
func fallocate(uintptr, int64) error { return errors.ErrUnsupported }
