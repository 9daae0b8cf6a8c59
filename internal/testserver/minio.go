package testserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MinIO credentials of every private MinIO server.
const (
	MinIOAccessKey = "echostore-test"
	MinIOSecretKey = "echostore-test-secret"
	MinIORegion    = "us-east-1"
)

// MinIO is a running private MinIO server.
type MinIO struct {
	// Endpoint is "http://127.0.0.1:<port>".
	Endpoint string
	// Dir holds the server's data.
	Dir string

	proc *proc
	port int
	bin  string
}

// MinIOBinary returns the path of the minio server binary or an error
// wrapping ErrMissing that says how to build it.
func MinIOBinary() (string, error) {
	if p := os.Getenv("ECHOSTORE_MINIO"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	p := filepath.Join(CacheBin(), "minio")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("minio: %w (build it: GOBIN=%s go install github.com/minio/minio@%s, or run bash .ci/run)",
		ErrMissing, CacheBin(), MinIOVersion)
}

// MinIOVersion is the pinned MinIO build the tests run against.
const MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// CacheBin is the folder .ci/run installs server binaries into:
// $XDG_CACHE_HOME/echostore/bin, or ~/.cache/echostore/bin.
func CacheBin() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "echostore", "bin")
}

// StartMinIO starts a MinIO server on free loopback ports in a new temporary
// directory and waits until it is live.
func StartMinIO(ctx context.Context) (*MinIO, error) {
	bin, err := MinIOBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "echostore-minio-")
	if err != nil {
		return nil, fmt.Errorf("minio dir: %w", err)
	}
	m := &MinIO{Dir: dir, bin: bin}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if m.port, err = freePort(); err != nil {
			return nil, err
		}
		m.Endpoint = "http://127.0.0.1:" + strconv.Itoa(m.port)
		if lastErr = m.start(ctx); lastErr == nil {
			return m, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func (m *MinIO) start(ctx context.Context) error {
	console, err := freePort()
	if err != nil {
		return err
	}
	env := []string{
		"MINIO_ROOT_USER=" + MinIOAccessKey,
		"MINIO_ROOT_PASSWORD=" + MinIOSecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CI_CD=on",
	}
	data := filepath.Join(m.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	args := []string{"server", data, "--quiet",
		"--address", "127.0.0.1:" + strconv.Itoa(m.port),
		"--console-address", "127.0.0.1:" + strconv.Itoa(console)}
	p, err := startProc(m.bin, args, m.Dir, "minio.log", env)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	err = waitReady(ctx, p, "minio on "+m.Endpoint, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Endpoint+"/minio/health/ready", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: %s", resp.Status)
		}
		// "ready" can answer before the object layer is up, when a bucket
		// call still fails with 503 XMinioServerNotInitialized: the server
		// is ready once an S3 call succeeds.
		if _, err := m.S3().ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
			return fmt.Errorf("list buckets: %w", err)
		}
		return nil
	})
	if err != nil {
		_ = p.stop(syscall.SIGKILL, 5*time.Second)
		return err
	}
	m.proc = p
	return nil
}

// S3 returns an S3 client for the server, with its credentials.
func (m *MinIO) S3() *s3.Client {
	return s3.New(s3.Options{
		Region:       MinIORegion,
		BaseEndpoint: aws.String(m.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(MinIOAccessKey, MinIOSecretKey, ""),
	})
}

// CreateBucket creates a bucket, succeeding if it exists already.
func (m *MinIO) CreateBucket(ctx context.Context, name string) error {
	_, err := m.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err != nil {
		var owned interface{ ErrorCode() string }
		if errors.As(err, &owned) && (owned.ErrorCode() == "BucketAlreadyOwnedByYou" || owned.ErrorCode() == "BucketAlreadyExists") {
			return nil
		}
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// URL returns a gocloud s3:// URL for bucket on this server.
func (m *MinIO) URL(bucket string) string {
	return "s3://" + bucket + "?endpoint=" + m.Endpoint + "&region=" + MinIORegion + "&use_path_style=true&disable_https=true"
}

// Env returns the standard AWS environment variables that authenticate to
// this server ("KEY=value").
func (m *MinIO) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + MinIOAccessKey,
		"AWS_SECRET_ACCESS_KEY=" + MinIOSecretKey,
		"AWS_REGION=" + MinIORegion,
	}
}

// Kill ends the server with SIGKILL.
func (m *MinIO) Kill() error {
	if m.proc == nil {
		return nil
	}
	return m.proc.stop(syscall.SIGKILL, 10*time.Second)
}

// Restart starts the server again on the same port and data after Kill.
func (m *MinIO) Restart(ctx context.Context) error {
	if err := m.Kill(); err != nil {
		return err
	}
	return m.start(ctx)
}

// Stop ends the server and removes its data.
func (m *MinIO) Stop() error {
	var err error
	if m.proc != nil {
		err = m.proc.stop(syscall.SIGTERM, 10*time.Second)
		m.proc = nil
	}
	os.RemoveAll(m.Dir)
	return err
}
