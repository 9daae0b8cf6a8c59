//go:build !peers

package all

import (
	"context"

	"github.com/echostore/echostore/internal/bench"
)

// PeersBuilt reports whether this build has the peers (-tags peers).
const PeersBuilt = false

// runPeers fails at once: the peers are not in this build.
func runPeers(context.Context, *env, string, PeersOptions, *bench.Progress) (*bench.Report, error) {
	return nil, errNoPeers
}

// AsynqVersion is "" in a build without the peers.
func AsynqVersion() string { return "" }

// RiverVersion is "" in a build without the peers.
func RiverVersion() string { return "" }
