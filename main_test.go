package echostore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// redisURL is the private redis-server the examples run against, started
// by TestMain.
var redisURL string

// servers are the other servers the tests share (a Redis Cluster), started
// on first use and stopped when the tests end.
var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "echostore examples need redis-server:", err)
		return 1
	}
	defer r.Stop()
	redisURL = r.URL
	return servers.Run(m)
}
