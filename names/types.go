package names

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Queue is a checked queue name. The zero Queue is no name (IsZero); every
// other value was made by ParseQueue and is valid, so a layer that takes a
// Queue never checks it again.
type Queue struct{ s string }

// Stream is a checked stream name; see Queue.
type Stream struct{ s string }

// Volume is a checked volume name; see Queue.
type Volume struct{ s string }

// ParseQueue checks s as a queue name. The error wraps ErrInvalid.
func ParseQueue(s string) (Queue, error) {
	if err := Check(KindQueue, s); err != nil {
		return Queue{}, err
	}
	return Queue{s}, nil
}

// ParseStream checks s as a stream name. The error wraps ErrInvalid.
func ParseStream(s string) (Stream, error) {
	if err := Check(KindStream, s); err != nil {
		return Stream{}, err
	}
	return Stream{s}, nil
}

// ParseVolume checks s as a volume name. The error wraps ErrInvalid.
func ParseVolume(s string) (Volume, error) {
	if err := Check(KindVolume, s); err != nil {
		return Volume{}, err
	}
	return Volume{s}, nil
}

// String returns the name ("" for the zero Queue).
func (q Queue) String() string { return q.s }

// IsZero reports whether q is the zero Queue (no name).
func (q Queue) IsZero() bool { return q.s == "" }

// MarshalText returns the name.
func (q Queue) MarshalText() ([]byte, error) { return []byte(q.s), nil }

// UnmarshalText parses b with ParseQueue, so a decoded Queue is checked.
func (q *Queue) UnmarshalText(b []byte) (err error) {
	*q, err = ParseQueue(string(b))
	return err
}

// String returns the name ("" for the zero Stream).
func (s Stream) String() string { return s.s }

// IsZero reports whether s is the zero Stream (no name).
func (s Stream) IsZero() bool { return s.s == "" }

// MarshalText returns the name.
func (s Stream) MarshalText() ([]byte, error) { return []byte(s.s), nil }

// UnmarshalText parses b with ParseStream, so a decoded Stream is checked.
func (s *Stream) UnmarshalText(b []byte) (err error) {
	*s, err = ParseStream(string(b))
	return err
}

// String returns the name ("" for the zero Volume).
func (v Volume) String() string { return v.s }

// IsZero reports whether v is the zero Volume (no name).
func (v Volume) IsZero() bool { return v.s == "" }

// MarshalText returns the name.
func (v Volume) MarshalText() ([]byte, error) { return []byte(v.s), nil }

// UnmarshalText parses b with ParseVolume, so a decoded Volume is checked.
func (v *Volume) UnmarshalText(b []byte) (err error) {
	*v, err = ParseVolume(string(b))
	return err
}

// StreamRef names stream S of queue Q together with its archive volume
// "archive.Q.S". Its constructors check the combined volume name once (two
// valid names can make one over MaxLen), so every StreamRef but the zero
// one has a valid archive volume.
//
// A StreamRef names a stream at any Redis key instead when made by KeyRef:
// then Queue and Stream are zero, Key returns the key, and Volume is
// derived from the key (KeyVolumePrefix).
type StreamRef struct {
	q   Queue
	s   Stream
	k   Key
	vol Volume
}

// NewStreamRef returns the reference to stream s of queue q. It fails,
// wrapping ErrInvalid, if either is zero or their archive volume name is
// not a valid volume name.
//
// The mapping to "archive.Q.S" is the contract (a fresh data dir knows
// which volume to pull from the names alone), and it is not one-to-one:
// names may hold '.', so a.b/c and a/b.c both map to "archive.a.b.c". The
// archive package keeps the collision harmless: a volume records the
// stream it belongs to and refuses every other (archive.MetaOwner,
// archive.ErrVolumeOwner), and serve refuses a configuration archiving two
// streams of one volume name.
func NewStreamRef(q Queue, s Stream) (StreamRef, error) {
	if q.IsZero() {
		return StreamRef{}, fmt.Errorf("queue name is empty: %w", ErrInvalid)
	}
	if s.IsZero() {
		return StreamRef{}, fmt.Errorf("stream name is empty: %w", ErrInvalid)
	}
	v, err := ParseVolume("archive." + q.s + "." + s.s)
	if err != nil {
		return StreamRef{}, fmt.Errorf("archive volume of %s/%s: %w", q.s, s.s, err)
	}
	return StreamRef{q: q, s: s, vol: v}, nil
}

// ParseStreamRef checks q and s and returns their StreamRef.
func ParseStreamRef(q, s string) (StreamRef, error) {
	qq, err := ParseQueue(q)
	if err != nil {
		return StreamRef{}, err
	}
	ss, err := ParseStream(s)
	if err != nil {
		return StreamRef{}, err
	}
	return NewStreamRef(qq, ss)
}

// Queue returns the queue of r.
func (r StreamRef) Queue() Queue { return r.q }

// Stream returns the stream of r.
func (r StreamRef) Stream() Stream { return r.s }

// Volume returns the archive volume of r: "archive.Q.S", or for a key
// stream the volume derived from its key (KeyVolumePrefix).
func (r StreamRef) Volume() Volume { return r.vol }

// IsZero reports whether r is the zero StreamRef.
func (r StreamRef) IsZero() bool { return r.q.IsZero() && r.k.IsZero() }

// String returns "Q/S", or for a key stream `key "K"` (K Go-quoted), for
// messages.
func (r StreamRef) String() string {
	if !r.k.IsZero() {
		return "key " + quoteKey(r.k.s)
	}
	return r.q.s + "/" + r.s.s
}

// LogAttr is the stream as attributes of a log line: queue=Q stream=S
// for a stream of a queue, key=K for a stream at a key (an attribute with
// no key, which slog's handlers inline).
func (r StreamRef) LogAttr() slog.Attr {
	if !r.k.IsZero() {
		return slog.Attr{Value: slog.GroupValue(slog.String("key", r.k.s))}
	}
	return slog.Attr{Value: slog.GroupValue(slog.String("queue", r.q.s), slog.String("stream", r.s.s))}
}

// AcceptVolumeOf returns the accept volume of queue q on node n:
// "accept.Q.N".
func AcceptVolumeOf(q Queue, node uint16) (Volume, error) {
	if q.IsZero() {
		return Volume{}, fmt.Errorf("queue name is empty: %w", ErrInvalid)
	}
	v, err := ParseVolume("accept." + q.s + "." + strconv.Itoa(int(node)))
	if err != nil {
		return Volume{}, fmt.Errorf("accept volume of %s: %w", q.s, err)
	}
	return v, nil
}
