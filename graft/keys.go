package graft

import (
	"encoding/binary"
	"math"
)

// Key kinds: the first byte of every key in the store (docs/GRAFT.md).
const (
	kindStore  byte = 0x00 // the store record
	kindVolume byte = 0x01 // volume records, by name
	kindPage   byte = 0x02 // page versions
	kindCommit byte = 0x03 // commit records
	kindMeta   byte = 0x04 // metadata versions
	// A follower's lazily stored pages (lazy.go):
	kindFrame   byte = 0x05 // frame records of unfetched remote frames
	kindPending byte = 0x06 // the pending remote commit of a writer
)

const (
	pagePrefixLen = 1 + 8 + 8              // kind, volume id, page index
	pageKeyLen    = pagePrefixLen + 8      // + inverted LSN
	commitKeyLen  = 1 + 8 + 8              // kind, volume id, LSN
	metaFixedLen  = 1 + 8 + 1 + 8          // kind, volume id, key length, inverted LSN
	volPrefixLen  = 1                      // kind
	lsnNone       = uint64(0)              // no commit has LSN 0
	lsnMax        = uint64(math.MaxUint64) // inverted: 0, the first version of a page
)

var storeKey = []byte{kindStore}

// appendPageKey appends the key of page i of volume vid at lsn:
// 0x02 | vid BE | i BE | ^lsn BE. Versions of one page sort newest first, so
// a seek to (vid, i, ^L) lands on the newest version at or below L.
func appendPageKey(dst []byte, vid, i, lsn uint64) []byte {
	dst = append(dst, kindPage)
	dst = binary.BigEndian.AppendUint64(dst, vid)
	dst = binary.BigEndian.AppendUint64(dst, i)
	return binary.BigEndian.AppendUint64(dst, ^lsn)
}

// putPageKey writes the same key into a fixed buffer.
func putPageKey(dst *[pageKeyLen]byte, vid, i, lsn uint64) []byte {
	dst[0] = kindPage
	binary.BigEndian.PutUint64(dst[1:9], vid)
	binary.BigEndian.PutUint64(dst[9:17], i)
	binary.BigEndian.PutUint64(dst[17:25], ^lsn)
	return dst[:]
}

// decodePageKey splits a page key of volume vid into page index and LSN.
func decodePageKey(k []byte, vid uint64) (i, lsn uint64, ok bool) {
	if len(k) != pageKeyLen || k[0] != kindPage || binary.BigEndian.Uint64(k[1:9]) != vid {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[9:17]), ^binary.BigEndian.Uint64(k[17:25]), true
}

// pageBounds returns the key range holding every version of pages lo..hi of
// volume vid: [first version of lo, LSN-0 slot of hi). LSN 0 is never
// written, so the exclusive upper bound loses nothing and needs no hi+1.
func pageBounds(vid, lo, hi uint64) (lower, upper []byte) {
	b := make([]byte, 0, 2*pageKeyLen)
	lower = appendPageKey(b, vid, lo, lsnMax)
	upper = appendPageKey(lower[len(lower):], vid, hi, lsnNone)
	return lower, upper
}

// appendCommitKey appends the key of commit lsn of volume vid:
// 0x03 | vid BE | lsn BE (commits sort oldest first).
func appendCommitKey(dst []byte, vid, lsn uint64) []byte {
	dst = append(dst, kindCommit)
	dst = binary.BigEndian.AppendUint64(dst, vid)
	return binary.BigEndian.AppendUint64(dst, lsn)
}

// decodeCommitKey returns the LSN of a commit key of volume vid.
func decodeCommitKey(k []byte, vid uint64) (uint64, bool) {
	if len(k) != commitKeyLen || k[0] != kindCommit || binary.BigEndian.Uint64(k[1:9]) != vid {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[9:17]), true
}

// appendMetaKey appends the key of metadata key mk of volume vid at lsn:
// 0x04 | vid BE | len(mk) u8 | mk | ^lsn BE. The length byte keeps the
// versions of one key contiguous (no key is a prefix of another's slot).
func appendMetaKey(dst []byte, vid uint64, mk string, lsn uint64) []byte {
	dst = append(dst, kindMeta)
	dst = binary.BigEndian.AppendUint64(dst, vid)
	dst = append(dst, byte(len(mk)))
	dst = append(dst, mk...)
	return binary.BigEndian.AppendUint64(dst, ^lsn)
}

// metaBounds returns the key range of the versions of mk at or below lsn.
func metaBounds(vid uint64, mk string, lsn uint64) (lower, upper []byte) {
	n := metaFixedLen + len(mk)
	b := make([]byte, 0, 2*n)
	lower = appendMetaKey(b, vid, mk, lsn)
	upper = appendMetaKey(lower[len(lower):], vid, mk, lsnNone)
	return lower, upper
}

// volumeKey returns the key of the volume record of name: 0x01 | name.
func volumeKey(name string) []byte {
	k := make([]byte, 0, volPrefixLen+len(name))
	k = append(k, kindVolume)
	return append(k, name...)
}
