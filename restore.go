package echostore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/redact"
	"github.com/echostore/echostore/xid"
)

// A restore rebuilds a node's data dir from the remote alone, after the
// disk was lost: every archive volume the remote holds and the node's own
// accept volumes (accept.Q.<Config.NodeNumber>) are created and pulled lazily —
// each volume's newest checkpoint and the log above it, pages as remote
// references fetched on first read — before the accept tier starts, so
// that its recovery dispatches again the jobs those volumes hold above
// their safe index (the job stream dedups by id). docs/RELIABILITY.md
// ("Disk loss and restore") says what survives.

// Sentinel errors of a restore.
var (
	// ErrNotEmpty: a restore was asked into a data dir that already holds
	// something (*NotEmptyError says what); nothing was created or
	// changed.
	ErrNotEmpty = errors.New("echostore: the data directory is not empty")
	// ErrRestoreRemote: a restore from a remote inside the data dir
	// (file://<data>/remote, the default), which a lost disk takes with
	// it; nothing was created.
	ErrRestoreRemote = errors.New("echostore: a restore needs a remote outside the data directory")
	// ErrRestorePending: the data dir was left by a restore that did not
	// finish (the file RestoreMarker is in it); it opens again only with a
	// restore mode, which finishes it.
	ErrRestorePending = errors.New("echostore: the data directory holds an unfinished restore")
)

// restoreIgnored are the entries of a data dir that a restore treats as
// empty: serve's token (which serve writes before it opens the node) and
// socket, and a new filesystem's lost+found.
var restoreIgnored = []string{TokenFile, SocketFile, "lost+found"}

// NotEmptyError reports a restore refused because the data dir holds
// something. It wraps ErrNotEmpty.
type NotEmptyError struct {
	Dir     string
	Entries []string // what the data dir holds (sorted; at most 10)
	Store   bool     // among them a graft store or an accept outbox
}

// Error says what the data dir holds and what to do.
func (e *NotEmptyError) Error() string {
	what := "it holds " + strings.Join(e.Entries, ", ")
	if e.Store {
		what = "it holds a store (" + strings.Join(e.Entries, ", ") + ")"
	}
	return fmt.Sprintf("%v: %s: %s; a restore rebuilds an empty data dir: give an empty or new --data, "+
		"or restore into this one with --force (it creates the volumes the data dir lacks, pulls those it has, and deletes nothing)",
		ErrNotEmpty, e.Dir, what)
}

// Unwrap returns ErrNotEmpty.
func (e *NotEmptyError) Unwrap() error { return ErrNotEmpty }

// dataState is what a data dir holds, as a restore sees it.
type dataState struct {
	entries []string // every entry but restoreIgnored, sorted
	store   bool     // graft/ or accept/ among them
	pending bool     // RestoreMarker among them
}

func (s dataState) empty() bool { return len(s.entries) == 0 }

// readDataState reads the data dir's entries; a missing dir is empty.
func readDataState(dir string) (dataState, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return dataState{}, nil
	}
	if err != nil {
		return dataState{}, fmt.Errorf("echostore: read data dir %s: %w", dir, err)
	}
	var st dataState
	for _, de := range des {
		name := de.Name()
		switch {
		case slices.Contains(restoreIgnored, name):
			continue
		case name == RestoreMarker:
			st.pending = true
		case name == GraftDir || name == AcceptDir:
			st.store = true
		}
		st.entries = append(st.entries, name)
	}
	slices.Sort(st.entries)
	return st, nil
}

// CheckRestore makes the checks of cfg.Restore that Open makes first,
// with no side effect: a data dir that holds what the mode refuses
// (*NotEmptyError), a remote inside the data dir (ErrRestoreRemote), an
// unfinished restore without a restore mode (ErrRestorePending). A caller
// that writes into the data dir before Open (serve's token file) calls it
// first.
func CheckRestore(cfg Config) error {
	rurl := cfg.Remote
	if rurl == "" {
		var err error
		if rurl, err = DefaultRemote(cfg.Data); err != nil {
			return err
		}
	}
	_, err := planRestore(cfg, rurl)
	return err
}

// restorePlan is what open does about Config.Restore.
type restorePlan struct {
	restore bool   // restore the volumes
	skip    string // why a RestoreIfEmpty open does not restore
	// marker: write RestoreMarker before anything else: the data dir
	// holds no store (or an unfinished restore), so a restore cut short
	// would leave it incomplete. A forced restore into a store writes none:
	// the store is whole before and after, and may be another process's.
	marker bool
}

// planRestore decides, before anything is created, what open does about
// cfg.Restore, and refuses what the mode does not allow.
func planRestore(cfg Config, rurl string) (restorePlan, error) {
	if cfg.Restore == RestoreOff {
		if _, err := os.Stat(filepath.Join(cfg.Data, RestoreMarker)); err == nil {
			return restorePlan{}, fmt.Errorf("%w (%s holds %s): finish it with `echostore restore --data %s` (or serve with restore: true), which pulls what is missing",
				ErrRestorePending, cfg.Data, RestoreMarker, cfg.Data)
		}
		return restorePlan{}, nil
	}
	st, err := readDataState(cfg.Data)
	if err != nil {
		return restorePlan{}, err
	}
	if err := checkRestoreRemote(cfg.Data, rurl); err != nil {
		return restorePlan{}, err
	}
	switch {
	case st.empty(), st.pending:
		return restorePlan{restore: true, marker: true}, nil
	case cfg.Restore == RestoreForce:
		return restorePlan{restore: true, marker: !st.store}, nil
	case cfg.Restore == RestoreIfEmpty && st.store:
		return restorePlan{skip: "the data dir holds a store: it is opened as it is"}, nil
	case cfg.Restore == RestoreIfEmpty, cfg.Restore == RestoreEmpty:
		e := &NotEmptyError{Dir: cfg.Data, Entries: st.entries, Store: st.store}
		if len(e.Entries) > 10 {
			e.Entries = append(e.Entries[:10:10], "…")
		}
		return restorePlan{}, e
	}
	return restorePlan{}, fmt.Errorf("%w: restore mode %v", ErrConfig, cfg.Restore)
}

// checkRestoreRemote refuses a file:// remote inside the data dir.
func checkRestoreRemote(data, rurl string) error {
	u, err := url.Parse(rurl)
	if err != nil || !strings.EqualFold(u.Scheme, "file") {
		return nil // remote.Open reports a bad URL; other schemes are elsewhere
	}
	dir, err := filepath.Abs(data)
	if err != nil {
		return fmt.Errorf("echostore: data dir %s: %w", data, err)
	}
	p := filepath.Clean(filepath.FromSlash(u.Path))
	if rel, err := filepath.Rel(dir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%w: the remote %s is in the data dir %s, which a lost disk takes with it: give the remote the node replicated to (--remote)",
			ErrRestoreRemote, redact.URL(rurl), data)
	}
	return nil
}

// writeRestoreMarker creates the data dir (mode 0700) and RestoreMarker in
// it, synced, before anything else of the restore is created.
func writeRestoreMarker(data, rurl string) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("echostore: create data dir %s: %w", data, err)
	}
	p := filepath.Join(data, RestoreMarker)
	body := fmt.Sprintf("restore from %s started %s\n", redact.URL(rurl), time.Now().UTC().Format(time.RFC3339))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("echostore: restore marker: %w", err)
	}
	_, werr := f.WriteString(body)
	if err := errors.Join(werr, f.Sync(), f.Close(), durable.SyncDir(data)); err != nil {
		return fmt.Errorf("echostore: restore marker %s: %w", p, err)
	}
	return nil
}

// removeRestoreMarker removes RestoreMarker once the restore is complete.
func removeRestoreMarker(data string) error {
	if err := os.Remove(filepath.Join(data, RestoreMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("echostore: remove the restore marker: %w", err)
	}
	if err := durable.SyncDir(data); err != nil {
		return fmt.Errorf("echostore: remove the restore marker: %w", err)
	}
	return nil
}

// Restored returns what the restore of Open did (Config.Restore), or nil
// when Open did not restore.
func (n *Node) Restored() *RestoreResult { return n.restored }

// restore rebuilds the volumes of the remote the node restores (restore
// chooses them) into the open store, before the accept tier starts.
func (n *Node) restore(ctx context.Context) (*RestoreResult, error) {
	start := time.Now()
	res := &RestoreResult{Data: n.cfg.Data, Remote: redact.URL(n.rurl), Node: n.cfg.NodeNumber, Mode: n.cfg.Restore.String(),
		Restored: true, Volumes: []RestoredVolume{}, Skipped: []SkippedVolume{}}
	m := &restoreMeter{Store: n.rs}
	n.store.AttachRemote(m)
	defer n.store.AttachRemote(n.rs)
	vols, err := remoteVolumes(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("echostore: restore from %s: %w", redact.URL(n.rurl), err)
	}
	suffix := "." + strconv.Itoa(n.cfg.NodeNumber)
	var errs []error
	for _, name := range vols {
		v, err := names.ParseVolume(name)
		if err != nil {
			res.Skipped = append(res.Skipped, SkippedVolume{Volume: name, Reason: "not a volume name"})
			continue
		}
		kind := ""
		switch {
		case names.IsArchiveVolume(v):
			kind = "archive"
		case strings.HasPrefix(name, "accept.") && strings.HasSuffix(name, suffix) && isQueue(name, suffix):
			kind = "accept"
		case strings.HasPrefix(name, "accept."):
			res.Skipped = append(res.Skipped, SkippedVolume{Volume: name, Reason: "another node's accept volume"})
			continue
		default:
			res.Skipped = append(res.Skipped, SkippedVolume{Volume: name, Reason: "neither an archive volume nor an accept volume"})
			continue
		}
		rv, err := n.restoreVolume(ctx, v, kind)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Volumes = append(res.Volumes, rv)
	}
	res.Requests, res.BytesFetched = m.requests.Load(), m.bytes.Load()
	res.TookMs = time.Since(start).Milliseconds()
	if len(errs) > 0 {
		return res, fmt.Errorf("echostore: restore: %d of %d volumes failed (run the restore again: it pulls what is missing): %w",
			len(errs), len(errs)+len(res.Volumes), errors.Join(errs...))
	}
	return res, nil
}

// isQueue reports whether the accept volume name accept.Q<suffix> names a
// queue Q, as the accept tier's recovery parses it.
func isQueue(name, suffix string) bool {
	_, err := names.ParseQueue(strings.TrimSuffix(strings.TrimPrefix(name, "accept."), suffix))
	return err == nil
}

// restoreVolume creates volume v (unless the data dir has it) and pulls
// it: from the remote's newest checkpoint, pages left in the remote.
func (n *Node) restoreVolume(ctx context.Context, v names.Volume, kind string) (RestoredVolume, error) {
	vol, err := n.store.Volume(ctx, v)
	existed := err == nil
	if errors.Is(err, graft.ErrVolumeNotFound) {
		vol, err = n.store.CreateVolume(ctx, v)
	}
	if err != nil {
		return RestoredVolume{}, fmt.Errorf("volume %s: %w", v, err)
	}
	if _, err := vol.Pull(ctx, nil); err != nil {
		return RestoredVolume{}, fmt.Errorf("volume %s: %w", v, err)
	}
	u, err := vol.Unfetched(ctx)
	if err != nil {
		return RestoredVolume{}, fmt.Errorf("volume %s: %w", v, err)
	}
	in := vol.Info()
	n.log.Info("restore: volume restored", "volume", v.String(), "kind", kind, "remote_lsn", in.RemoteLSN,
		"local_lsn", in.LocalLSN, "pages", in.Pages, "unfetched_frames", u)
	return RestoredVolume{Volume: v.String(), Kind: kind, RemoteLSN: in.RemoteLSN, LocalLSN: in.LocalLSN,
		Pages: in.Pages, Bytes: in.Bytes, UnfetchedFrames: u, Existed: existed}, nil
}

// probeRemote reads one object of the remote's volumes through rs (none:
// nothing to check), so that keys that do not open the remote's objects
// fail (remote.ErrSealed, sealed.ErrUnknownKey, sealed.ErrNotSealed)
// before a restore writes anything.
func probeRemote(ctx context.Context, rs remote.Store) error {
	objs, err := rs.List(ctx, "volumes/", 1)
	if err != nil || len(objs) == 0 {
		return err
	}
	b, err := rs.Get(ctx, objs[0].Key)
	if err != nil {
		return fmt.Errorf("read %s: %w", objs[0].Key, err)
	}
	if len(b) >= len(remote.SealedMagic) && string(b[:len(remote.SealedMagic)]) == remote.SealedMagic {
		// What a sealed store returns is open: an envelope here is one
		// read without a key.
		return fmt.Errorf("read %s: %w", objs[0].Key, remote.ErrSealed)
	}
	return nil
}

// remoteVolumes lists the volumes that have objects under volumes/ in rs,
// by name (one LIST request per remote.ListPageSize objects).
func remoteVolumes(ctx context.Context, rs remote.Store) ([]string, error) {
	objs, err := rs.List(ctx, "volumes/", 0)
	if err != nil {
		return nil, fmt.Errorf("list volumes/: %w", err)
	}
	var out []string
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Key, "volumes/")
		if !ok {
			continue
		}
		name, _, ok := strings.Cut(rest, "/")
		if !ok || name == "" || (len(out) > 0 && out[len(out)-1] == name) {
			continue
		}
		out = append(out, name)
	}
	return out, nil
}

// restoreMeter counts the requests a restore makes and the bytes the remote
// returns to it.
type restoreMeter struct {
	remote.Store
	requests, bytes atomic.Int64
}

// Get implements remote.Store.
func (m *restoreMeter) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := m.Store.Get(ctx, key)
	m.requests.Add(1)
	m.bytes.Add(int64(len(b)))
	return b, err
}

// GetRange implements remote.Store.
func (m *restoreMeter) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := m.Store.GetRange(ctx, key, off, n)
	m.requests.Add(1)
	m.bytes.Add(int64(len(b)))
	return b, err
}

// List implements remote.Store.
func (m *restoreMeter) List(ctx context.Context, prefix string, limit int) ([]remote.ObjectInfo, error) {
	objs, err := m.Store.List(ctx, prefix, limit)
	m.requests.Add(max(1, int64((len(objs)+remote.ListPageSize-1)/remote.ListPageSize)))
	return objs, err
}

// PutIfAbsent implements remote.Store.
func (m *restoreMeter) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	m.requests.Add(1)
	return m.Store.PutIfAbsent(ctx, key, data)
}

// Put implements remote.Store.
func (m *restoreMeter) Put(ctx context.Context, key string, data []byte) error {
	m.requests.Add(1)
	return m.Store.Put(ctx, key, data)
}

// Delete implements remote.Store.
func (m *restoreMeter) Delete(ctx context.Context, key string) error {
	m.requests.Add(1)
	return m.Store.Delete(ctx, key)
}

// restoreSeams lowers the seam cache of each restored archive volume's
// stream that is ahead of the volume: folds never pushed (trim_after:
// local), lost with the disk. Their records are still live unless the
// cycle trimmed them (a fold durable only locally, trim_after: local);
// without lowering, the stream's reads and cycles would wait for a pull
// that has nothing to bring. It returns the volumes whose cache it
// lowered.
func (n *Node) restoreSeams(ctx context.Context, res *RestoreResult) error {
	if n.mq == nil {
		return nil
	}
	for i, rv := range res.Volumes {
		if rv.Kind != "archive" {
			continue
		}
		v, err := names.ParseVolume(rv.Volume)
		if err != nil {
			return err
		}
		vol, err := n.store.Volume(ctx, v)
		if err != nil {
			return fmt.Errorf("volume %s: %w", v, err)
		}
		lowered, err := archive.RepairSeam(ctx, n.mq, vol, archive.State{Pages: 1, W: xid.Max})
		if err != nil {
			return fmt.Errorf("volume %s: seam cache: %w", v, err)
		}
		if lowered {
			res.Volumes[i].SeamLowered = true
			n.log.Warn("restore: the stream's seam cache named folds the remote never received (lost with the disk); lowered to the restored volume",
				"volume", v.String())
		}
	}
	return nil
}
