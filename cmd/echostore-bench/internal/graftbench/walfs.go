package graftbench

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/internal/bench/walfs"
)

// walTimer counts and times the syncs of Pebble's WAL, so that the report
// can say how many commits share an fsync and how long those fsyncs take.
type walTimer struct {
	syncs atomic.Int64
	nanos atomic.Int64
}

// fs returns the OS filesystem with the WAL's syncs timed by t.
func (t *walTimer) fs() vfs.FS {
	return walfs.New(vfs.Default, func(sync func() error) error {
		start := time.Now()
		err := sync()
		t.nanos.Add(int64(time.Since(start)))
		t.syncs.Add(1)
		return err
	})
}
