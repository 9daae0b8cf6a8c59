package accept

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
)

// Replicator pushes a volume's local commits to its remote log. Push returns
// the remote LSN whose commit covers every local commit of vol made before
// the call: the LSN a sync enqueue prints.
type Replicator interface {
	Push(ctx context.Context, vol *graft.Volume) (remoteLSN uint64, err error)
}

// LogReplicator is the Replicator over a remote.Store: remote.Push with a
// remote.Source on the graft volume. The sync point and the pending remote
// commit of each volume live in a small state file in its directory
// (docs/ACCEPT.md, "Replication state"). Safe for concurrent use; pushes of
// one volume are serialised.
type LogReplicator struct {
	store remote.Store
	dir   string

	mu   sync.Mutex
	vols map[string]*volumeSource
}

// NewLogReplicator returns a replicator that pushes to store and keeps its
// per-volume state files in dir (created if needed).
func NewLogReplicator(store remote.Store, dir string) (*LogReplicator, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("accept: replication state dir: %w", err)
	}
	return &LogReplicator{store: store, dir: dir, vols: map[string]*volumeSource{}}, nil
}

// Push publishes vol's local commits above its sync point as one remote
// commit and returns the remote LSN of the sync point after it.
func (r *LogReplicator) Push(ctx context.Context, vol *graft.Volume) (uint64, error) {
	src, err := r.source(vol)
	if err != nil {
		return 0, err
	}
	src.push.Lock()
	defer src.push.Unlock()
	sp, err := remote.Push(ctx, src.log, src)
	if err != nil {
		return 0, fmt.Errorf("accept: push %s: %w", vol.Name(), err)
	}
	return sp.Remote, nil
}

// Log returns the remote log of the named volume.
func (r *LogReplicator) Log(name string) (*remote.Log, error) {
	return remote.NewLog(r.store, name)
}

func (r *LogReplicator) source(vol *graft.Volume) (*volumeSource, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.vols[vol.Name()]; ok {
		return s, nil
	}
	l, err := remote.NewLog(r.store, vol.Name())
	if err != nil {
		return nil, fmt.Errorf("accept: remote log %s: %w", vol.Name(), err)
	}
	s := &volumeSource{vol: vol, log: l, path: filepath.Join(r.dir, "sync-"+vol.Name())}
	r.vols[vol.Name()] = s
	return s, nil
}

// volumeSource is remote.Source over a graft.Volume and one state file.
type volumeSource struct {
	vol  *graft.Volume
	log  *remote.Log
	path string
	push sync.Mutex // one Push at a time

	mu     sync.Mutex
	loaded bool
	sp     remote.SyncPoint
	pend   []byte
}

var _ remote.Source = (*volumeSource)(nil)

const (
	syncMagic   = "ECHOASYN"
	syncVersion = 1
	syncFixed   = 8 + 2 + 2 + 8 + 32 + 8 + 4 // up to the pending bytes
)

func (s *volumeSource) load() error {
	if s.loaded {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("accept: replication state: %w", err)
	}
	sp, pend, err := decodeSyncState(b)
	if err != nil {
		return fmt.Errorf("accept: replication state %s: %w", s.path, err)
	}
	s.sp, s.pend, s.loaded = sp, pend, true
	return nil
}

func encodeSyncState(sp remote.SyncPoint, pend []byte) []byte {
	b := make([]byte, 0, syncFixed+len(pend)+4)
	b = append(b, syncMagic...)
	b = binary.LittleEndian.AppendUint16(b, syncVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, sp.Remote)
	b = append(b, sp.Hash[:]...)
	b = binary.LittleEndian.AppendUint64(b, sp.Local)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(pend)))
	b = append(b, pend...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeSyncState(b []byte) (remote.SyncPoint, []byte, error) {
	var sp remote.SyncPoint
	if len(b) < syncFixed+4 || !bytes.Equal(b[:8], []byte(syncMagic)) {
		return sp, nil, ErrCorrupt
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return sp, nil, ErrCorrupt
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != syncVersion {
		return sp, nil, ErrVersion
	}
	sp.Remote = binary.LittleEndian.Uint64(b[12:])
	copy(sp.Hash[:], b[20:52])
	sp.Local = binary.LittleEndian.Uint64(b[52:])
	n := binary.LittleEndian.Uint32(b[60:])
	if uint64(n) != uint64(len(b)-syncFixed-4) {
		return sp, nil, ErrCorrupt
	}
	var pend []byte
	if n > 0 {
		pend = slices.Clone(b[syncFixed : syncFixed+int(n)])
	}
	return sp, pend, nil
}

// store writes the state durably: a temporary file, fsync, rename, and an
// fsync of the directory.
func (s *volumeSource) store(sp remote.SyncPoint, pend []byte) error {
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("accept: replication state: %w", err)
	}
	_, err = f.Write(encodeSyncState(sp, pend))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(s.path))
	}
	if err != nil {
		return fmt.Errorf("accept: replication state: %w", err)
	}
	s.sp, s.pend = sp, pend
	return nil
}

func (s *volumeSource) SyncPoint(context.Context) (remote.SyncPoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sp, s.load()
}

func (s *volumeSource) LocalHead(context.Context) (uint64, error) { return s.vol.Head(), nil }

func (s *volumeSource) Changes(ctx context.Context, from, to uint64) ([]remote.Page, map[string][]byte, error) {
	if to <= from {
		return nil, nil, nil
	}
	commits, err := s.vol.Commits(ctx, from+1, to)
	if err != nil {
		return nil, nil, err
	}
	var idx []uint64
	keys := map[string]bool{}
	for _, c := range commits {
		idx = append(idx, c.Pages...)
		for _, m := range c.Meta {
			keys[m.Key] = true
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	snap, err := s.vol.SnapshotAt(ctx, to)
	if err != nil {
		return nil, nil, err
	}
	defer snap.Close()
	pages := make([]remote.Page, 0, len(idx))
	for _, i := range idx {
		b, err := snap.Get(ctx, i)
		if err != nil {
			return nil, nil, err
		}
		pages = append(pages, remote.Page{Index: i, Data: b})
	}
	var meta map[string][]byte
	if len(keys) > 0 {
		meta = make(map[string][]byte, len(keys))
		for k := range keys {
			v, err := snap.Meta(ctx, k)
			if err != nil {
				return nil, nil, err
			}
			meta[k] = v
		}
	}
	return pages, meta, nil
}

func (s *volumeSource) Pending(context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pend, s.load()
}

func (s *volumeSource) SetPending(_ context.Context, commit []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	return s.store(s.sp, slices.Clone(commit))
}

func (s *volumeSource) SetSyncPoint(_ context.Context, sp remote.SyncPoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	return s.store(sp, nil)
}
