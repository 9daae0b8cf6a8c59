package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// startRedis starts a private redis-server for one test.
func startRedis(t *testing.T) *testserver.Redis {
	t.Helper()
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}

// run runs the echostore command line in-process and returns its stdout,
// stderr and error (non-nil means a non-zero exit status).
func run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd(&stdout, &stderr)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
