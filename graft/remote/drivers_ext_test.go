package remote_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/graft/remote/mem"
)

// TestUnknownScheme: a scheme none of the drivers given opens is an
// *UnknownSchemeError that wraps ErrUnknownScheme and ErrBadURL and names
// the schemes of those drivers, in their order; a URL without a scheme
// names them too.
func TestUnknownScheme(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		drivers []remote.Driver
		url     string
		want    []string
		says    string
	}{
		{"every driver", drivers.All(), "ftp://x/y", []string{"file", "s3", "gs", "azblob", "mem"}, `scheme "ftp" (want file, s3, gs, azblob or mem)`},
		{"two drivers", []remote.Driver{mem.Driver{}, file.Driver{}}, "s3://bucket", []string{"mem", "file"}, `scheme "s3" (want mem or file)`},
		{"none", nil, "file:///tmp/x", nil, "no remote drivers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := remote.Open(ctx, c.url, c.drivers...)
			var ue *remote.UnknownSchemeError
			if s != nil || !errors.As(err, &ue) || !errors.Is(err, remote.ErrUnknownScheme) || !errors.Is(err, remote.ErrBadURL) {
				t.Fatalf("Open(%q) = %v, %v; want an *UnknownSchemeError wrapping ErrUnknownScheme and ErrBadURL", c.url, s, err)
			}
			if strings.Join(ue.Available, ",") != strings.Join(c.want, ",") || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Open(%q) = %q, available %v; want %v, saying %q", c.url, err, ue.Available, c.want, c.says)
			}
		})
	}
	_, err := remote.Open(ctx, "bucket", mem.Driver{}, file.Driver{})
	if !errors.Is(err, remote.ErrBadURL) || errors.Is(err, remote.ErrUnknownScheme) || !strings.Contains(err.Error(), "want mem:// or file://") {
		t.Fatalf("no scheme: %v", err)
	}
}

// TestNoCloudSDK: importing graft or graft/remote links no cloud SDK and
// no gocloud package; those come only with the driver packages.
func TestNoCloudSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/echostore/echostore/graft", "github.com/echostore/echostore/graft/remote").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, sdk := range []string{"gocloud.dev/", "github.com/aws/", "cloud.google.com/", "google.golang.org/api", "google.golang.org/grpc", "github.com/Azure/"} {
			if strings.HasPrefix(p, sdk) {
				t.Errorf("graft links %s", p)
			}
		}
	}
}
