package diskguard_test

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/diskguard"
	"github.com/echostore/echostore/internal/faultfs"
)

// until polls check until it returns want (nil or not), failing the test
// after a deadline.
func until(t *testing.T, what string, g *diskguard.Guard, full bool) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := g.Check()
		if (err != nil) == full {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Check = %v after 10s", what, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGuard: writes are refused below the reserve and taken again above
// it; an ENOSPC releases the ballast (its space goes back to the disk) and
// keeps writes refused until the reserve and a new ballast fit, which the
// guard then lays by itself.
func TestGuard(t *testing.T) {
	dir := t.TempDir()
	fs := faultfs.New(vfs.Default)
	g := diskguard.New(diskguard.Options{Dir: dir, FS: fs, Reserve: 1 << 20, Ballast: 2 << 20, What: "test"})
	ballast := filepath.Join(dir, diskguard.BallastName)
	if fi, err := fs.Stat(ballast); err != nil || fi.Size() != 2<<20 {
		t.Fatalf("ballast: %v %v", fi, err)
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	fs.Arm(512 << 10)
	err := until(t, "below the reserve", g, true)
	if !errors.Is(err, diskguard.ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("refusal %v: want ErrFull wrapping ENOSPC", err)
	}
	fs.Arm(4 << 20)
	until(t, "above the reserve", g, false)

	fs.Arm(0)
	g.NoSpace()
	if _, err := fs.Stat(ballast); err == nil {
		t.Fatal("the ballast is still there after an ENOSPC")
	}
	if err := g.Check(); !errors.Is(err, diskguard.ErrFull) {
		t.Fatalf("after an ENOSPC: %v", err)
	}
	// The ballast's 2 MiB came back: above the reserve, but no room for a
	// new ballast yet, so writes stay refused.
	fs.Arm(fs.Free() + 512<<10)
	deadline := time.Now().Add(50 * diskguard.ProbeInterval)
	for time.Now().Before(deadline) {
		if err := g.Check(); err == nil {
			t.Fatal("writes taken again before the ballast could be laid anew")
		}
		time.Sleep(time.Millisecond)
	}
	fs.Disarm()
	until(t, "room again", g, false)
	if fi, err := fs.Stat(ballast); err != nil || fi.Size() != 2<<20 {
		t.Fatalf("the ballast was not laid anew: %v %v", fi, err)
	}
}
