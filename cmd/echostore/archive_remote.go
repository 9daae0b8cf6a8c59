package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
)

// openConfiguredRemote opens the remote the archive commands use: --remote
// (or ECHOSTORE_REMOTE), else the default file://<data>/remote if that
// folder exists (nothing creates it here). Without one it returns nil, or,
// with need, an error wrapping graft.ErrNoRemote. The caller closes it.
func openConfiguredRemote(ctx context.Context, g *globals, need bool) (remote.Store, error) {
	if g.remote == "" {
		if _, err := os.Stat(filepath.Join(g.data, "remote")); err != nil {
			if need {
				return nil, fmt.Errorf("no remote configured (give --remote or ECHOSTORE_REMOTE; %s does not exist): %w", g.remoteShown(), graft.ErrNoRemote)
			}
			return nil, nil
		}
	}
	rs, err := remote.Open(ctx, g.remoteURL(), drivers.All()...)
	if err != nil {
		return nil, fmt.Errorf("remote %s: %w; check --remote (file:///dir or s3://bucket?endpoint=…)", g.remoteShown(), err)
	}
	return rs, nil
}
