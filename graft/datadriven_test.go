package graft

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/remote"
)

// TestScripts drives stores, volumes and a shared mem:// remote with the
// scripts in testdata/model (github.com/cockroachdb/datadriven's format, as in Pebble;
// `go test -run TestScripts -rewrite` rewrites the expectations), beside
// the rapid model test (model_test.go): the scripts spell out the cases a
// reader wants to see, the model explores the rest. Commands (store= names
// a store, default "a"; vol= a volume, default "v"):
//
//	open [store=S]                       open (or reopen) a store on its own
//	                                     in-memory filesystem, on the remote
//	close [store=S]                      close it (its filesystem is kept)
//	create [store=S] [vol=V]             CreateVolume
//	commit [store] [vol] [synced]        one transaction of the input's lines:
//	                                     "put I DATA", "archive N DATA",
//	                                     "meta KEY VALUE"; prints lsn=N
//	begin name=T [store] [vol]           stage the input's lines in txn T
//	finish name=T                        commit txn T
//	read [store] [vol] [lsn=L] page=I    the page at L (the head by default;
//	                                     snap=N reads held snapshot N instead)
//	meta [store] [vol] [lsn=L] key=K     the metadata value at L (or snap=N)
//	scan [store] [vol] [lsn=L] [reverse] every page "I=DATA", in index order
//	                                     (or snap=N)
//	hold name=N [store] [vol] [lsn=L]    keep a snapshot open as N
//	release name=N                       close snapshot N
//	keep-from [store] [vol] lsn=L        SetKeepFrom
//	gc [store] [vol]                     GC; prints the horizon
//	info [store] [vol]                   head, remote and sync LSNs, pages, bytes, horizon
//	push [store] [vol]                   Push; prints the sync point
//	pull [store] [vol]                   Pull; prints the sync point
//
// An error prints as "error: " and the sentinel (or typed error) it wraps.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/model", func(t *testing.T, path string) {
		st := &graftScript{
			rs:     openRemote(t, "mem://"),
			fs:     map[string]vfs.FS{},
			stores: map[string]*Store{},
			txns:   map[string]*Txn{},
			snaps:  map[string]*Snapshot{},
		}
		defer st.closeAll()
		datadriven.RunTest(t, path, st.run)
	})
}

type graftScript struct {
	rs     remote.Store
	fs     map[string]vfs.FS
	stores map[string]*Store
	txns   map[string]*Txn
	snaps  map[string]*Snapshot
}

func (st *graftScript) closeAll() {
	for _, sn := range st.snaps {
		_ = sn.Close()
	}
	for _, s := range st.stores {
		_ = s.Close()
	}
}

func arg(d *datadriven.TestData, t *testing.T, key, def string) string {
	if d.HasArg(key) {
		return argString(t, d, key)
	}
	return def
}

func (st *graftScript) store(t *testing.T, d *datadriven.TestData) *Store {
	name := arg(d, t, "store", "a")
	s, ok := st.stores[name]
	if !ok {
		t.Fatalf("%s: store %q is not open", d.Pos, name)
	}
	return s
}

func (st *graftScript) volume(t *testing.T, d *datadriven.TestData) (*Volume, error) {
	return st.store(t, d).Volume(context.Background(), volName(arg(d, t, "vol", "v")))
}

// snapshot returns the held snapshot snap=, or opens one at lsn= (the head
// by default) that the caller closes.
func (st *graftScript) snapshot(t *testing.T, d *datadriven.TestData) (*Snapshot, error) {
	if d.HasArg("snap") {
		name := argString(t, d, "snap")
		sn, ok := st.snaps[name]
		if !ok {
			t.Fatalf("%s: no snapshot %q", d.Pos, name)
		}
		return sn, nil
	}
	v, err := st.volume(t, d)
	if err != nil {
		return nil, err
	}
	if d.HasArg("lsn") {
		return v.SnapshotAt(context.Background(), argUint(t, d, "lsn"))
	}
	return v.Snapshot(context.Background())
}

func (st *graftScript) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "open":
		name := arg(d, t, "store", "a")
		if s, ok := st.stores[name]; ok {
			_ = s.Close()
		}
		if st.fs[name] == nil {
			st.fs[name] = vfs.NewMem()
		}
		s, err := Open(ctx, "graft", Options{FS: st.fs[name], Remote: st.rs})
		if err != nil {
			return errText(err)
		}
		st.stores[name] = s
		return "ok"
	case "close":
		name := arg(d, t, "store", "a")
		err := st.store(t, d).Close()
		delete(st.stores, name)
		if err != nil {
			return errText(err)
		}
		return "ok"
	case "create":
		if _, err := st.store(t, d).CreateVolume(ctx, volName(arg(d, t, "vol", "v"))); err != nil {
			return errText(err)
		}
		return "ok"
	case "commit", "begin":
		v, err := st.volume(t, d)
		if err != nil {
			return errText(err)
		}
		txn := v.Begin()
		if err := stage(t, d, txn); err != nil {
			txn.Discard()
			return errText(err)
		}
		if d.Cmd == "begin" {
			st.txns[argString(t, d, "name")] = txn
			return fmt.Sprintf("base=%d", txn.Base())
		}
		return finish(ctx, d, txn)
	case "finish":
		name := argString(t, d, "name")
		txn, ok := st.txns[name]
		if !ok {
			t.Fatalf("%s: no txn %q", d.Pos, name)
		}
		delete(st.txns, name)
		return finish(ctx, d, txn)
	case "read", "meta":
		sn, err := st.snapshot(t, d)
		if err != nil {
			return errText(err)
		}
		if !d.HasArg("snap") {
			defer sn.Close()
		}
		var b []byte
		if d.Cmd == "read" {
			b, err = sn.Get(ctx, argUint(t, d, "page"))
		} else {
			b, err = sn.Meta(ctx, argString(t, d, "key"))
		}
		if err != nil {
			return errText(err)
		}
		return string(b)
	case "scan":
		sn, err := st.snapshot(t, d)
		if err != nil {
			return errText(err)
		}
		if !d.HasArg("snap") {
			defer sn.Close()
		}
		it := sn.Scan(ctx, 0, ^uint64(0))
		if d.HasArg("reverse") {
			it = sn.ScanReverse(ctx, 0, ^uint64(0))
		}
		var b strings.Builder
		for it.Next() {
			fmt.Fprintf(&b, "%s=%s\n", pageName(it.Index()), it.Value())
		}
		if err := it.Err(); err != nil {
			fmt.Fprintf(&b, "%s\n", errText(err))
		}
		if b.Len() == 0 {
			return "empty"
		}
		return b.String()
	case "hold":
		sn, err := st.snapshot(t, d)
		if err != nil {
			return errText(err)
		}
		st.snaps[argString(t, d, "name")] = sn
		return fmt.Sprintf("lsn=%d", sn.LSN())
	case "release":
		name := argString(t, d, "name")
		sn, ok := st.snaps[name]
		if !ok {
			t.Fatalf("%s: no snapshot %q", d.Pos, name)
		}
		delete(st.snaps, name)
		if err := sn.Close(); err != nil {
			return errText(err)
		}
		return "ok"
	case "keep-from":
		v, err := st.volume(t, d)
		if err == nil {
			err = v.SetKeepFrom(ctx, argUint(t, d, "lsn"))
		}
		if err != nil {
			return errText(err)
		}
		return "ok"
	case "gc":
		v, err := st.volume(t, d)
		if err != nil {
			return errText(err)
		}
		gs, err := v.GC(ctx)
		if err != nil {
			return errText(err)
		}
		return fmt.Sprintf("horizon=%d", gs.Horizon)
	case "info":
		v, err := st.volume(t, d)
		if err != nil {
			return errText(err)
		}
		in := v.Info()
		return fmt.Sprintf("head=%d remote=%d sync=%d pages=%d bytes=%d horizon=%d",
			in.LocalLSN, in.RemoteLSN, in.SyncLSN, in.Pages, in.Bytes, in.Horizon)
	case "push", "pull":
		v, err := st.volume(t, d)
		if err != nil {
			return errText(err)
		}
		var sp remote.SyncPoint
		if d.Cmd == "push" {
			sp, err = v.Push(ctx)
		} else {
			sp, err = v.Pull(ctx, nil)
		}
		if err != nil {
			return errText(err)
		}
		return fmt.Sprintf("remote=%d local=%d head=%d", sp.Remote, sp.Local, v.Head())
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// stage applies the input's lines to txn.
func stage(t *testing.T, d *datadriven.TestData, txn *Txn) error {
	for _, line := range strings.Split(d.Input, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			t.Fatalf("%s: line %q: want \"put I DATA\", \"archive N DATA\" or \"meta KEY VALUE\"", d.Pos, line)
		}
		var err error
		switch f[0] {
		case "put", "archive":
			i, perr := strconv.ParseUint(f[1], 0, 64)
			if perr != nil {
				t.Fatalf("%s: line %q: %v", d.Pos, line, perr)
			}
			if f[0] == "put" {
				err = txn.Put(i, []byte(f[2]))
			} else {
				err = txn.PutArchive(i, []byte(f[2]))
			}
		case "meta":
			err = txn.SetMeta(f[1], []byte(f[2]))
		default:
			t.Fatalf("%s: line %q: unknown operation %q", d.Pos, line, f[0])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func finish(ctx context.Context, d *datadriven.TestData, txn *Txn) string {
	dur := Unsynced
	if d.HasArg("synced") {
		dur = Synced
	}
	lsn, err := txn.Commit(ctx, dur)
	if err != nil {
		return errText(err)
	}
	return fmt.Sprintf("lsn=%d", lsn)
}

// pageName prints archive pages as "archive+N".
func pageName(i uint64) string {
	if i >= ArchiveBase {
		return fmt.Sprintf("archive+%d", i-ArchiveBase)
	}
	return strconv.FormatUint(i, 10)
}

// errText names the sentinel or typed error err wraps, so that scripts do
// not depend on message wording.
func errText(err error) string {
	var ce *ConflictError
	var de *DivergedError
	if errors.As(err, &ce) {
		return fmt.Sprintf("error: conflict (base %d, head %d)", ce.Base, ce.Head)
	}
	if errors.As(err, &de) {
		return "error: diverged"
	}
	for _, s := range []error{ErrVolumeNotFound, ErrNotFound, ErrPageTooLarge, ErrPageRange, ErrMetaTooLarge,
		ErrTxnTooLarge, ErrEmptyCommit, ErrTxnDone, ErrSnapshotGone, ErrFutureLSN, ErrCorrupt, ErrClosed,
		ErrReadOnly, ErrNoStore, ErrNoRemote, ErrLocked} {
		if errors.Is(err, s) {
			return "error: " + strings.TrimPrefix(s.Error(), "graft: ")
		}
	}
	return "error: " + err.Error()
}

// argString and argUint read the value of a directive's argument key (a
// number in any of Go's bases), failing the test when it is missing or
// malformed.
func argString(t *testing.T, d *datadriven.TestData, key string) string {
	var s string
	d.ScanArgs(t, key, &s)
	return s
}

func argUint(t *testing.T, d *datadriven.TestData, key string) uint64 {
	n, err := strconv.ParseUint(argString(t, d, key), 0, 64) // 0x… and 0b… too
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return n
}
