package accept

import (
	"fmt"

	"github.com/echostore/echostore/api"
)

// Mode is api.Mode: the durability an enqueue asks for.
type Mode = api.Mode

// The modes (api.ModeAsync, api.ModeSync).
const (
	// Async acknowledges once the intent is recorded in the outbox: a crash
	// loses at most the outbox's K acknowledged records.
	Async = api.ModeAsync
	// Sync acknowledges only after the intent's batch is one Graft commit on
	// the queue's accept volume and that commit is pushed to the remote.
	Sync = api.ModeSync
)

// ParseMode parses "async" or "sync".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "async":
		return Async, nil
	case "sync":
		return Sync, nil
	}
	return 0, fmt.Errorf("%w: mode %q: want async or sync", ErrInvalid, s)
}
