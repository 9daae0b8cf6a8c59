package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MissingCommitsError reports a store that Pebble opened in a state older
// than its own records claim: the record of Volume names head LSN Head, but
// the commits of LSNs From..To below it are missing. Pebble's MANIFEST
// names the tables that hold what was flushed and its write-ahead log holds
// the rest; a damaged (cut) MANIFEST makes Pebble open the tables of an
// older state under a newer log, so the writes in between are lost and a
// read at those LSNs would return older versions of pages. Open refuses
// such a store. It wraps ErrCorrupt.
type MissingCommitsError struct {
	Volume   string
	Head     uint64 // the head LSN the volume record claims
	From, To uint64 // the first range of LSNs whose commits are missing
}

// Error describes the failure and what to do about it.
func (e *MissingCommitsError) Error() string {
	return fmt.Sprintf("graft: volume %q claims head LSN %d, but the commits of LSNs %d–%d are missing: "+
		"Pebble opened an older state than was written (a damaged MANIFEST), and reads at those LSNs would return older pages; "+
		"the store is not opened. Move the data dir aside and pull the volume from the remote into a fresh one "+
		"(`echostore volume pull %s` with a new --data); local commits never pushed are lost",
		e.Volume, e.Head, e.From, e.To, e.Volume)
}

// Unwrap returns ErrCorrupt.
func (e *MissingCommitsError) Unwrap() error { return ErrCorrupt }

// checkReplayed checks, on a database Pebble opened read-only (nothing
// replayed from its write-ahead log is flushed yet), that what the log
// replayed joins the state the tables hold. The tables hold a prefix of the
// store's batches and the log the batches after it, so for every volume the
// commits from the head its record has in the tables alone (the durable
// view) up to the head it has in the log must all be there: the log holds
// every batch after the tables' state, and each commit is one batch. Cost:
// the volume records, read twice, plus the commit records replayed from the
// log (none after a clean Close, which flushes).
func checkReplayed(ctx context.Context, db *pebble.DB) error {
	lo, hi := []byte{kindVolume}, []byte{kindVolume + 1}
	all, err := db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer all.Close()
	durable, err := db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi, OnlyReadGuaranteedDurable: true})
	if err != nil {
		return err
	}
	defer durable.Close()
	for ok := all.First(); ok; ok = all.Next() {
		name := string(all.Key()[volPrefixLen:])
		rec, err := iterVolumeRecord(all, name)
		if err != nil {
			return err
		}
		from := max(rec.Horizon, 1) // GC keeps the commit at the horizon
		if durable.SeekGE(all.Key()) && bytes.Equal(durable.Key(), all.Key()) {
			d, err := iterVolumeRecord(durable, name)
			if err != nil {
				return err
			}
			if d.ID == rec.ID { // else dropped and created again since
				from = max(from, min(d.Head, rec.Head)+1)
			}
		}
		if from <= rec.Head {
			if err := checkCommits(ctx, db, name, rec, from); err != nil {
				return err
			}
		}
	}
	return errors.Join(all.Error(), durable.Error())
}

// checkCommits checks that volume name has a commit record at every LSN
// from from to its head.
func checkCommits(ctx context.Context, db *pebble.DB, name string, rec volumeRecord, from uint64) error {
	it, err := db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: appendCommitKey(nil, rec.ID, from),
		UpperBound: appendCommitKey(nil, rec.ID, rec.Head+1),
	})
	if err != nil {
		return err
	}
	defer it.Close()
	want := from
	for ok := it.First(); ok && want <= rec.Head; ok = it.Next() {
		lsn, _ := decodeCommitKey(it.Key(), rec.ID)
		if lsn != want {
			return &MissingCommitsError{Volume: name, Head: rec.Head, From: want, To: lsn - 1}
		}
		want++
	}
	if err := it.Error(); err != nil {
		return err
	}
	if want <= rec.Head {
		return &MissingCommitsError{Volume: name, Head: rec.Head, From: want, To: rec.Head}
	}
	return nil
}

// iterVolumeRecord decodes the record of volume name at it.
func iterVolumeRecord(it *pebble.Iterator, name string) (volumeRecord, error) {
	val, err := it.ValueAndErr()
	if err != nil {
		return volumeRecord{}, err
	}
	rec, err := decodeVolumeRecord(val)
	if err != nil {
		return volumeRecord{}, fmt.Errorf("graft: volume %q: %w", name, err)
	}
	return rec, nil
}
