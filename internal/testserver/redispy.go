package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// RedisPy returns the python3 that imports redis-py (Debian's
// python3-redis), a Redis client nobody here wrote, for the tests that
// judge the protocol with it. When the module is missing it installs it
// with apt-get (as root, bounded by ctx and 5 minutes). It fails wrapping
// ErrMissing when python3 or apt-get is not there (Unavailable then skips
// the test, or fails it under CI=true), and with apt-get's output when the
// install fails.
func RedisPy(ctx context.Context) (string, error) {
	// Debian's python3-redis is for Debian's python3, which another
	// python3 earlier on PATH (pyenv, a venv) does not see.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		if py, err = exec.LookPath("python3"); err != nil {
			return "", fmt.Errorf("python3: %w (install it: apt-get install -y python3-redis)", ErrMissing)
		}
	}
	if exec.CommandContext(ctx, py, "-c", "import redis").Run() == nil {
		return py, nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil || os.Geteuid() != 0 {
		return "", fmt.Errorf("redis-py: %w (install it: apt-get install -y python3-redis)", ErrMissing)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, apt, "install", "-y", "-q", "python3-redis")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get install python3-redis: %w\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, py, "-c", "import redis").CombinedOutput(); err != nil {
		return "", fmt.Errorf("python3-redis installed, but python3 cannot import redis: %w\n%s", err, out)
	}
	return py, nil
}
