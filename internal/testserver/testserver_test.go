package testserver

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

var servers Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

func TestRedisPlainAndAOF(t *testing.T) {
	ctx := context.Background()
	r := servers.Redis(t)
	if _, err := Do(ctx, r.Addr, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if got, _ := Do(ctx, r.Addr, "GET", "k"); got != "v" {
		t.Fatalf("GET = %q", got)
	}
	aof := servers.RedisAOF(t)
	if got, _ := Do(ctx, aof.Addr, "CONFIG", "GET", "appendfsync"); !strings.HasSuffix(got, "always") {
		t.Fatalf("appendfsync = %q", got)
	}
	if aof.Addr == r.Addr {
		t.Fatal("AOF server shares the plain server's address")
	}
}

func TestRedisKillRestartKeepsAOF(t *testing.T) {
	ctx := context.Background()
	r, err := StartRedis(ctx, RedisConfig{AOF: true})
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	if _, err := Do(ctx, r.Addr, "SET", "k", "kept"); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := Do(ctx, r.Addr, "GET", "k"); err != nil || got != "kept" {
		t.Fatalf("after kill -9 and restart: GET = %q, %v", got, err)
	}
}

func TestCluster(t *testing.T) {
	c := servers.Cluster(t)
	if len(c.Addrs) != 3 {
		t.Fatalf("%d nodes", len(c.Addrs))
	}
	for _, n := range c.Nodes {
		if n.Port > clusterPortMax {
			t.Fatalf("port %d above %d", n.Port, clusterPortMax)
		}
		info, err := Do(context.Background(), n.Addr, "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_size:3") {
			t.Fatalf("CLUSTER INFO on %s: %q, %v", n.Addr, info, err)
		}
	}
}

func TestMinIO(t *testing.T) {
	ctx := context.Background()
	m := servers.MinIO(t)
	if err := m.CreateBucket(ctx, "probe"); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateBucket(ctx, "probe"); err != nil {
		t.Fatalf("second create: %v", err)
	}
	cl := m.S3()
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("probe"), Key: aws.String("a"),
		Body: strings.NewReader("hello")}); err != nil {
		t.Fatal(err)
	}
	out, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("probe"), Key: aws.String("a")})
	if err != nil || aws.ToInt64(out.ContentLength) != 5 {
		t.Fatalf("head: %v, %v", out, err)
	}
}
