package remote

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestOpenBadURL: every malformed remote URL is refused with an error
// wrapping ErrBadURL (ErrUnknownScheme for an unknown scheme) and a nil
// Store — not a nil *BlobStore inside a non-nil Store, whose Close panics —
// and the error says what is wrong.
func TestOpenBadURL(t *testing.T) {
	ctx := t.Context()
	cases := []struct{ url, says string }{
		{"s3://b?endpoint=http://127.0.0.1:1&foo=bar", `unknown query parameter "foo"`},
		{"gs://", "names no bucket"},
		{"azblob://", "names no bucket"},
		{"s3://", "names no bucket"},
		{"s3://?endpoint=http://127.0.0.1:1", "names no bucket"},
		{"s3://b?prefix=../x/", "prefix"},
		{"s3://b?prefix=a", "prefix"},
		{"mem://?prefix=/abs/", "prefix"},
		{"s3://b?key=one", "key"},
		{"s3://b/folder", "takes no path"},
		{"s3://b?disable_https=maybe", "disable_https"},
		{"s3://b?use_path_style=x", "use_path_style"},
		{"s3://b?imds=perhaps", "imds"},
		{"s3://b?ssetype=rot13", "ssetype"},
		{"s3://b?endpoint=http://127.0.0.1:1&region=r&hostname_immutable=x", "hostname_immutable"},
		{"mem://host", "mem://"},
		{"file://", "no directory"},
		{"file:///x?y=1", "no query"},
		{"nosuch://x", "scheme"},
		{"bucket-without-scheme", "no scheme"},
		{"s3://AKIA:SECRET@b", "credentials"},
		{"s3://b?secret_key=x", "credential"},
		{"s3://b?endpoint=http://ak:SECRET@127.0.0.1:1", "credentials"},
		{"%zz://x", "not a valid URL"},
	}
	for _, c := range cases {
		s, err := Open(ctx, c.url, testDrivers...)
		if s != nil {
			t.Errorf("Open(%q) = %#v (a non-nil Store) with %v", c.url, s, err)
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("Open(%q): Close of the returned Store panics: %v", c.url, r)
					}
				}()
				s.Close()
			}()
		}
		if !errors.Is(err, ErrBadURL) && !errors.Is(err, ErrUnknownScheme) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", c.url, err)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("Open(%q) = %q, want it to say %q", c.url, err, c.says)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("Open(%q) = %q shows the secret", c.url, err)
		}
	}
	// A file path that is a file, not a folder.
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(ctx, "file://"+f, testDrivers...); s != nil || !errors.Is(err, ErrBadURL) {
		t.Errorf("Open of a file: %v, %v", s, err)
	}
}

// TestFileStoreReadCreatesNothing: opening a file:// remote and reading
// from it (Get, GetRange, List, Probe, a log's head) creates no folder; the
// first write does.
func TestFileStoreReadCreatesNothing(t *testing.T) {
	ctx := t.Context()
	root := filepath.Join(t.TempDir(), "no", "such", "remote")
	s, err := Open(ctx, "file://"+root, testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "volumes/v/log/0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get: %v", err)
	}
	if _, err := s.GetRange(ctx, "segments/v/x", 0, 8); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRange: %v", err)
	}
	if objs, err := s.List(ctx, "volumes/", 0); err != nil || len(objs) != 0 {
		t.Errorf("List: %v, %v", objs, err)
	}
	if err := Probe(ctx, s); err != nil {
		t.Errorf("Probe: %v", err)
	}
	l := mustLog(t, s, "v")
	if head, err := l.Head(ctx); err != nil || head != 0 {
		t.Errorf("Head: %d, %v", head, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(root)))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read created %s: %v", filepath.Dir(filepath.Dir(root)), err)
	}
	if err := s.Put(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "a/b"); err != nil || string(got) != "x" {
		t.Fatalf("after the first write: %q, %v", got, err)
	}
}

// recorder is a TCP listener that counts the connections made to it and
// answers each with an HTTP 500.
type recorder struct {
	ln    net.Listener
	conns atomic.Int64
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *recorder) url() string { return "http://" + r.ln.Addr().String() }

// noAWSCredentials empties every source of AWS credentials but the EC2
// metadata service, which it points at imds.
func noAWSCredentials(t *testing.T, imds *recorder) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED", "AWS_DEFAULTS_MODE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("HOME", dir)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url())
}

// TestS3NoMetadataProbe: an s3:// remote without credentials does not ask
// the EC2 instance metadata service (169.254.169.254, here a recording
// listener put in its place) for them, and says what to set instead; its
// requests fail with ErrUnavailable before any connection. With imds=true
// in the URL the metadata service is asked.
func TestS3NoMetadataProbe(t *testing.T) {
	ctx := t.Context()
	imds, s3 := newRecorder(t), newRecorder(t)
	noAWSCredentials(t, imds)
	u := "s3://bucket?endpoint=" + s3.url() + "&region=us-east-1&use_path_style=true&disable_https=true"
	s, err := Open(ctx, u, testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.List(ctx, "volumes/", 1)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("List without credentials: %v; want ErrUnavailable naming AWS_ACCESS_KEY_ID", err)
	}
	if err := Probe(ctx, s); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Probe without credentials: %v", err)
	}
	if n := imds.conns.Load(); n != 0 {
		t.Errorf("%d connections to the metadata service", n)
	}
	if n := s3.conns.Load(); n != 0 {
		t.Errorf("%d connections to the S3 endpoint without credentials", n)
	}

	// Asked for, the metadata service is used: the recorder sees it.
	s2, err := Open(ctx, u+"&imds=true", testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, _ = s2.List(ctx, "volumes/", 1)
	if imds.conns.Load() == 0 {
		t.Error("imds=true: the metadata service was not asked")
	}
}

// TestS3Unavailable: an S3 endpoint that refuses connections, answers 500,
// or has no such bucket makes every request fail with ErrUnavailable —
// never ErrNotFound, which a reader takes for "no such object" — and
// Probe says so; a missing key on a live bucket is ErrNotFound and Probe
// passes.
func TestS3Unavailable(t *testing.T) {
	ctx := t.Context()
	m := servers.MinIO(t)
	s, _ := minioBucket(t, m) // sets the credentials in the environment
	if err := Probe(ctx, s); err != nil {
		t.Fatalf("Probe of a live bucket: %v", err)
	}
	if _, err := s.Get(ctx, "volumes/v/log/1"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	// A full store is not unavailable (it is answered with 507).
	full := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusInsufficientStorage)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>XMinioStorageFull</Code><Message>full</Message></Error>`))
	}))
	defer full.Close()
	fs, err := Open(ctx, "s3://bucket?endpoint="+full.URL+"&region=us-east-1&use_path_style=true&disable_https=true", testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if err := fs.PutIfAbsent(ctx, "volumes/v/log/1", []byte("x")); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("put to a full store: %v; want an error that is not ErrUnavailable", err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close()
	for name, u := range map[string]string{
		"refused":   "s3://bucket?endpoint=" + deadURL + "&region=us-east-1&use_path_style=true&disable_https=true",
		"500":       "s3://bucket?endpoint=" + newRecorder(t).url() + "&region=us-east-1&use_path_style=true&disable_https=true",
		"no bucket": m.URL("no-such-bucket-here"),
	} {
		st, err := Open(ctx, u, testDrivers...)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Get(ctx, "volumes/v/log/1"); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) {
			t.Errorf("%s: Get: %v; want ErrUnavailable", name, err)
		}
		if _, err := st.GetRange(ctx, "segments/v/x", 0, 8); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: GetRange: %v; want ErrUnavailable", name, err)
		}
		if _, err := st.List(ctx, "volumes/", 1); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: List: %v; want ErrUnavailable", name, err)
		}
		if err := st.PutIfAbsent(ctx, "volumes/v/log/1", []byte("x")); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrExists) {
			t.Errorf("%s: PutIfAbsent: %v; want ErrUnavailable", name, err)
		}
		if err := Probe(ctx, st); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Probe: %v; want ErrUnavailable", name, err)
		}
	}
}

// TestCloudMetadataNotAsked: gs:// and azblob:// remotes without
// credentials in the environment are refused, naming what to set, before
// their SDK asks the cloud's metadata service (here a recording listener
// in its place) for them; with metadata=true the metadata service is
// asked.
func TestCloudMetadataNotAsked(t *testing.T) {
	ctx := t.Context()
	md := newRecorder(t)
	noAWSCredentials(t, md)
	for _, k := range []string{"GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "STORAGE_EMULATOR_HOST_GRPC", "CLOUDSDK_CONFIG",
		"AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING",
		"AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_STORAGE_IS_LOCAL_EMULATOR"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("GCE_METADATA_HOST", md.ln.Addr().String())
	for u, says := range map[string]string{"gs://bucket": "GOOGLE_APPLICATION_CREDENTIALS", "azblob://container": "AZURE_STORAGE_KEY"} {
		s, err := Open(ctx, u, testDrivers...)
		if s != nil || !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "metadata=true") {
			t.Errorf("Open(%q) = %v, %v; want ErrBadURL naming %s and metadata=true", u, s, err, says)
		}
		if s != nil {
			s.Get(ctx, ProbeKey)
			s.Close()
		}
	}
	if n := md.conns.Load(); n != 0 {
		t.Fatalf("%d connections to the metadata service", n)
	}
	s, err := Open(ctx, "gs://bucket?metadata=true", testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _ = s.Get(ctx, ProbeKey)
	if md.conns.Load() == 0 {
		t.Error("metadata=true: the metadata service was not asked")
	}
}
