package remote

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/echostore/echostore/internal/testserver"
)

var servers testserver.Pool

// childEnv names the role a re-executed test binary plays (see TestChild).
const childEnv = "ECHOSTORE_REMOTE_CHILD"

// RunTests runs the package's tests with the drivers given (see
// drivers_test.go); TestMain in main_ext_test.go calls it.
func RunTests(m *testing.M, d TestDrivers) int {
	testDrivers, openFile, newS3Store = d.All, d.OpenFile, d.S3Store
	return servers.Run(m)
}

var bucketSeq atomic.Int64

// minioStore returns a store on a fresh bucket of the package's MinIO, with
// the credentials set in the environment, and its URL.
func minioStore(t testing.TB) (Store, string) {
	t.Helper()
	m := servers.MinIO(t)
	return minioBucket(t, m)
}

func minioBucket(t testing.TB, m *testserver.MinIO) (Store, string) {
	t.Helper()
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	name = fmt.Sprintf("%.40s-%d", strings.Trim(name, "-"), bucketSeq.Add(1))
	ctx := context.Background()
	if err := m.CreateBucket(ctx, name); err != nil {
		t.Fatal(err)
	}
	u := m.URL(name)
	s, err := Open(ctx, u, testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, u
}

func fileStore(t testing.TB) (Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(context.Background(), "file://"+dir, testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	return s, "file://" + dir
}

func memStore(t testing.TB) (Store, string) {
	t.Helper()
	s, err := Open(context.Background(), "mem://", testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ""
}

// eachStore runs f against a file://, a mem:// and a MinIO s3:// store.
func eachStore(t *testing.T, f func(t *testing.T, s Store)) {
	for _, c := range []struct {
		name string
		open func(testing.TB) (Store, string)
	}{{"file", fileStore}, {"mem", memStore}, {"s3", minioStore}} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := c.open(t)
			f(t, s)
		})
	}
}

// child starts this test binary again in role with the extra environment.
func child(t testing.TB, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestChild is the entry point of re-executed children; it does nothing in
// a normal run.
func TestChild(t *testing.T) {
	role := os.Getenv(childEnv)
	if role == "" {
		t.Skip("only runs as a child process")
	}
	var err error
	switch role {
	case "fence":
		err = childFence()
	case "pusher":
		err = childPusher()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}
