package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// The Redis clients nobody here wrote, that tests of the RESP front run:
// redis-py (Debian's python3-redis) and ioredis (npm). Each is installed
// on first use when it is missing; when its installer itself is missing
// (no apt-get, no npm) the error wraps ErrMissing, so that Unavailable
// skips the test outside CI and fails it in CI.

var (
	pyOnce sync.Once
	pyBin  string
	pyErr  error
	jsOnce sync.Once
	jsDir  string
	jsErr  error

	duckOnce sync.Once
	duckDir  string
	duckErr  error
)

// PythonRedis returns a python3 that imports redis-py, installing
// python3-redis with apt-get if the system python3 lacks it.
func PythonRedis(ctx context.Context) (string, error) {
	pyOnce.Do(func() { pyBin, pyErr = pythonRedis(ctx) })
	return pyBin, pyErr
}

func pythonRedis(ctx context.Context) (string, error) {
	py := "/usr/bin/python3" // Debian's, where python3-redis installs (and which it pulls in)
	if exec.CommandContext(ctx, py, "-c", "import redis").Run() == nil {
		return py, nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil || os.Geteuid() != 0 {
		return "", fmt.Errorf("redis-py: %w (install it: apt-get install -y python3-redis)", ErrMissing)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	aptCmd := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd
	}
	if _, err := aptCmd("install", "-y", "python3-redis").CombinedOutput(); err != nil {
		// The package lists may be missing or old on a new machine.
		if out, err := aptCmd("update", "-qq").CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get update: %w\n%s", err, tailOf(out))
		}
		if out, err := aptCmd("install", "-y", "python3-redis").CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get install -y python3-redis: %w\n%s", err, tailOf(out))
		}
	}
	if err := exec.CommandContext(ctx, py, "-c", "import redis").Run(); err != nil {
		return "", fmt.Errorf("python3-redis installed, and import redis still fails: %w", err)
	}
	return py, nil
}

// IORedis returns a node_modules directory that holds ioredis (put it in
// NODE_PATH), installing it with npm into the cache folder
// (CacheBin's parent, then npm) on first use.
func IORedis(ctx context.Context) (string, error) {
	jsOnce.Do(func() { jsDir, jsErr = ioredis(ctx) })
	return jsDir, jsErr
}

func ioredis(ctx context.Context) (string, error) { return npmInstall(ctx, "ioredis", "ioredis@6") }

// DuckDB returns a node_modules directory that holds DuckDB's Node API
// (@duckdb/node-api; put it in NODE_PATH), installing it with npm into the
// cache folder on first use, as IORedis does.
func DuckDB(ctx context.Context) (string, error) {
	duckOnce.Do(func() {
		duckDir, duckErr = npmInstall(ctx, filepath.Join("@duckdb", "node-api"), "@duckdb/node-api@1.5.6-r.1")
	})
	return duckDir, duckErr
}

// npmInstall installs pkg@version (spec) into the cache folder's npm
// prefix unless mod (its folder under node_modules) is there, and returns
// the node_modules directory.
func npmInstall(ctx context.Context, mod, spec string) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node: %w (install it: apt-get install -y nodejs npm)", ErrMissing)
	}
	prefix := filepath.Join(filepath.Dir(CacheBin()), "npm")
	mods := filepath.Join(prefix, "node_modules")
	if _, err := os.Stat(filepath.Join(mods, mod, "package.json")); err == nil {
		return mods, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%s: %w (install npm: apt-get install -y npm)", spec, ErrMissing)
	}
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefix", prefix, spec)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s: %w\n%s", spec, err, tailOf(out))
	}
	return mods, nil
}

// tailOf is the last lines of an installer's output.
func tailOf(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
