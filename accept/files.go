package accept

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/echostore/echostore/durable"
)

const (
	lockName  = "LOCK"
	segPrefix = "log-"
	segSuffix = ".log"
	snPrefix  = "snap-"
	snSuffix  = ".snap"
	// tmpSuffix ends an unfinished snapshot write (durable.WriteFile).
	tmpSuffix = durable.TempSuffix
	// corruptSuffix marks a snapshot recovery could not read, set aside.
	corruptSuffix = ".corrupt"
)

func segName(first uint64) string { return fmt.Sprintf("%s%016x%s", segPrefix, first, segSuffix) }
func snapName(seq uint64) string  { return fmt.Sprintf("%s%016x%s", snPrefix, seq, snSuffix) }

// parseName parses a segment or snapshot file name: the 16 hex digits
// between prefix and suffix.
func parseName(name, prefix, suffix string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) || len(name) != len(prefix)+16+len(suffix) {
		return 0, false
	}
	v, err := strconv.ParseUint(name[len(prefix):len(prefix)+16], 16, 64)
	return v, err == nil
}

// lockDir takes an exclusive flock on dir/LOCK; the kernel releases it when
// the process dies.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("accept: open %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("accept: open %s: %w (%v)", dir, ErrBusy, err)
	}
	return f, nil
}

// createSegment creates the segment file whose first block is first,
// writes and fsyncs its header, and fsyncs the directory.
func createSegment(dir string, first uint64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, segName(first)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(appendSegHeader(nil, first)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := durable.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
