package testserver

import "context"

// RedisPy returns the python3 that imports redis-py (Debian's
// python3-redis), a Redis client nobody here wrote, for the tests that
// judge the protocol with it: PythonRedis, which installs it with apt-get
// (as root, bounded by ctx and 5 minutes) when it is missing, and fails
// wrapping ErrMissing when apt-get is not there or the process is not root
// (Unavailable then skips the test, or fails it under CI=true).
func RedisPy(ctx context.Context) (string, error) { return PythonRedis(ctx) }
