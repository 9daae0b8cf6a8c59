package sealed

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	goldenfile "github.com/echostore/echostore/internal/golden"
)

// goldenVector is the envelope docs/FORMAT.md ("Sealed objects") gives as
// its golden vector: key 00…1f, nonce 20…3f, a plaintext of two chunks.
func goldenVector(t testing.TB) (Key, [32]byte, string, []byte) {
	t.Helper()
	raw := make([]byte, KeySize)
	var nonce [32]byte
	for i := range raw {
		raw[i] = byte(i)
		nonce[i] = byte(0x20 + i)
	}
	k, err := NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	plain := make([]byte, ChunkSize+10)
	for j := range plain {
		plain[j] = byte(j % 251)
	}
	return k, nonce, "volumes/archive.q.s/log/fffffffffffffffe", plain
}

// TestGoldenEnvelope: the golden envelope is exactly what the sealer
// writes for the vector (`go test ./graft/remote/sealed -run Golden
// -update` rewrites it; a change is a format change), its header is the
// one docs/FORMAT.md lays out byte by byte, its key id is the documented
// hash, and it opens to the plaintext.
func TestGoldenEnvelope(t *testing.T) {
	k, nonce, key, plain := goldenVector(t)
	env, err := sealWith(k, headerWith(k, nonce), key, plain)
	if err != nil {
		t.Fatal(err)
	}
	file := goldenfile.Bytes(t, "envelope.v1.bin", true, env)
	raw := make([]byte, KeySize)
	for i := range raw {
		raw[i] = byte(i)
	}
	sum := sha256.Sum256(append([]byte("echostore/sealed/key-id/v1\x00"), raw...))
	want := []byte("ESRE")
	want = binary.LittleEndian.AppendUint16(want, 1)
	want = binary.LittleEndian.AppendUint16(want, 0)
	want = append(want, sum[:8]...)
	want = append(want, nonce[:]...)
	if !bytes.Equal(file[:HeaderSize], want) {
		t.Fatalf("header %x, want %x", file[:HeaderSize], want)
	}
	if len(file) != 48+len(plain)+2*16 || int64(len(file)) != SealedSize(int64(len(plain))) {
		t.Fatalf("%d bytes stored", len(file))
	}
	ring, err := NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	got, err := open(ring, key, file)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open the golden envelope: %v", err)
	}
	t.Logf("key id %s", k.ID())
}
