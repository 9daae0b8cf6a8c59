package formatcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// errNoInstaller: neither a Python 3 with zstandard nor a way to install
// one (apt-get, as root) is on this machine.
var errNoInstaller = errors.New("no python3 with the zstandard module, and no apt-get to install python3-zstandard")

// pythonWithZstd returns a Python 3 interpreter that imports zstandard,
// installing Debian's python3-zstandard for /usr/bin/python3 if none does
// (as testserver installs nothing itself, this helper is the installer).
// Without one and without apt-get the test is skipped loudly, or fails when
// CI=true.
func pythonWithZstd(ctx context.Context, t *testing.T) string {
	t.Helper()
	if py := findPython(ctx); py != "" {
		return py
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		unavailable(t, errNoInstaller)
	}
	// Another package's helper may hold dpkg's lock: wait for it. A fresh
	// machine may have no package lists yet: update them once and retry.
	install := func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, "apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq",
			"--no-install-recommends", "python3", "python3-zstandard")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	if out, err := install(); err != nil {
		t.Logf("apt-get install python3-zstandard: %v\n%s; updating the package lists", err, out)
		if out, err := exec.CommandContext(ctx, "apt-get", "-o", "DPkg::Lock::Timeout=300", "update", "-qq").CombinedOutput(); err != nil {
			t.Fatalf("apt-get update: %v\n%s", err, out)
		}
		if out, err := install(); err != nil {
			t.Fatalf("apt-get install python3-zstandard: %v\n%s", err, out)
		}
	}
	if py := findPython(ctx); py != "" {
		return py
	}
	t.Fatalf("python3-zstandard installed, yet no python3 imports zstandard")
	return ""
}

// findPython returns the first Python 3 that imports zstandard: Debian's
// /usr/bin/python3 (where apt-get installs the module) first, then the one
// on PATH; "" if none does.
func findPython(ctx context.Context) string {
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, py := range candidates {
		if exec.CommandContext(ctx, py, "-c", "import sys, zstandard; sys.exit(sys.version_info < (3, 8))").Run() == nil {
			return py
		}
	}
	return ""
}

// unavailable skips loudly, or fails when CI=true.
func unavailable(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v", err)
	}
	msg := fmt.Sprintf("SKIPPED, PYTHON MISSING: %v", err)
	fmt.Fprintln(os.Stderr, "*** "+msg)
	t.Skip(msg)
}
