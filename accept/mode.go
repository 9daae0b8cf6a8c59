package accept

import "fmt"

// Mode is the durability an enqueue asks for.
type Mode uint8

const (
	// Async acknowledges once the intent is recorded in the outbox: a crash
	// loses at most the outbox's K acknowledged records.
	Async Mode = iota + 1
	// Sync acknowledges only after the intent's batch is one Graft commit on
	// the queue's accept volume and that commit is pushed to the remote.
	Sync
)

// String returns "async" or "sync".
func (m Mode) String() string {
	switch m {
	case Async:
		return "async"
	case Sync:
		return "sync"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

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
