package remote_test

import (
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/remotetest"
)

// TestStoreContract runs remote.Store's contract over the file://, mem://
// and MinIO s3:// stores.
func TestStoreContract(t *testing.T) {
	remote.EachStore(t, func(t *testing.T, s remote.Store) { remotetest.Contract(t, s) })
}

// TestConcurrentCreates: exactly one racing create of each key wins.
func TestConcurrentCreates(t *testing.T) {
	remote.EachStore(t, func(t *testing.T, s remote.Store) { remotetest.ConcurrentCreates(t, s) })
}

// TestMeteredStoreContract: the metering wrapper keeps every promise of the
// store it counts for.
func TestMeteredStoreContract(t *testing.T) {
	remote.EachStore(t, func(t *testing.T, s remote.Store) {
		m := remote.NewMeteredStore(s)
		remotetest.Contract(t, m)
		remotetest.ConcurrentCreates(t, m)
		if m.Meter().Total() == 0 {
			t.Fatal("the meter counted no request")
		}
	})
}
