package formatcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/graft/remote/sealed"
	nm "github.com/echostore/echostore/names"
)

// pythonWithCryptography returns a Python 3 that imports the cryptography
// package's AES-GCM and HKDF, installing Debian's python3-cryptography if
// none does (as pythonWithZstd installs python3-zstandard).
func pythonWithCryptography(ctx context.Context, t *testing.T) string {
	t.Helper()
	find := func() string {
		candidates := []string{"/usr/bin/python3"}
		if p, err := exec.LookPath("python3"); err == nil {
			candidates = append(candidates, p)
		}
		for _, py := range candidates {
			if exec.CommandContext(ctx, py, "-c", "from cryptography.hazmat.primitives.ciphers.aead import AESGCM; from cryptography.hazmat.primitives.kdf.hkdf import HKDF").Run() == nil {
				return py
			}
		}
		return ""
	}
	if py := find(); py != "" {
		return py
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		unavailable(t, fmt.Errorf("no python3 with the cryptography package, and no apt-get to install python3-cryptography"))
	}
	cmd := exec.CommandContext(ctx, "apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq",
		"--no-install-recommends", "python3", "python3-cryptography")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get install python3-cryptography: %v\n%s", err, out)
	}
	if py := find(); py != "" {
		return py
	}
	t.Fatal("python3-cryptography installed, yet no python3 imports it")
	return ""
}

// TestPythonOpensSealedObjects: sealed.py, written from docs/FORMAT.md
// ("Sealed objects") alone, opens the golden vector and every object of a
// sealed file:// remote (objects of sizes around the chunk edges, and a
// real remote log of commits, segments and a checkpoint) to the same
// plaintext as the Go reader, and refuses the objects damaged, moved to
// another key or sealed with another key.
func TestPythonOpensSealedObjects(t *testing.T) {
	ctx := t.Context()
	py := pythonWithCryptography(ctx, t)
	dir := t.TempDir()

	// The golden vector: key 00…1f.
	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(i)
	}
	goldenKey := filepath.Join(dir, "golden.key")
	if err := os.WriteFile(goldenKey, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	golden, err := filepath.Abs("../../graft/remote/sealed/testdata/golden/envelope.v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	plain := make([]byte, sealed.ChunkSize+10)
	for j := range plain {
		plain[j] = byte(j % 251)
	}
	const goldenObj = "volumes/archive.q.s/log/fffffffffffffffe"
	out, err := exec.CommandContext(ctx, py, "sealed.py", goldenKey, "--golden", golden, goldenObj).CombinedOutput()
	if want := fmt.Sprintf("%s %d %x 7c2649480e356aa5\n", goldenObj, len(plain), sha256.Sum256(plain)); err != nil || string(out) != want {
		t.Fatalf("sealed.py on the golden vector: %v\n%s\nwant %s", err, out, want)
	}

	// A sealed remote, written by the Go sealer over the file store.
	keyRaw := make([]byte, 32)
	if _, err := rand.Read(keyRaw); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "remote.key")
	if err := os.WriteFile(keyFile, keyRaw, 0o600); err != nil { // the raw form
		t.Fatal(err)
	}
	ring, err := sealed.LoadKeyring(keyFile, sealed.Key{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "remote")
	fs, err := remote.Open(ctx, "file://"+root, file.Driver{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	s := sealed.New(fs, ring)
	want := map[string][]byte{}
	for _, n := range []int{0, 1, sealed.ChunkSize - 1, sealed.ChunkSize, sealed.ChunkSize + 1, 3*sealed.ChunkSize + 77} {
		k := fmt.Sprintf("objects/size-%d", n)
		b := make([]byte, n)
		_, _ = rand.Read(b)
		if err := s.Put(ctx, k, b); err != nil {
			t.Fatal(err)
		}
		want[k] = b
	}
	vol, _ := nm.ParseVolume("archive.q.s")
	l, err := remote.NewLog(s, vol)
	if err != nil {
		t.Fatal(err)
	}
	var prev remote.Entry
	for lsn := uint64(1); lsn <= 3; lsn++ {
		var ps []remote.Page
		for i := range 30 {
			d := make([]byte, 5000)
			_, _ = rand.Read(d)
			ps = append(ps, remote.Page{Index: uint64(i) + lsn*100, Data: d})
		}
		if prev, err = l.Append(ctx, remote.Draft{LSN: lsn, Prev: prev.Hash, LocalFrom: lsn, LocalTo: lsn, Pages: ps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	objs, err := fs.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, ok := want[o.Key]; !ok {
			if want[o.Key], err = s.Get(ctx, o.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Damaged ones: a flipped byte, a cut at a chunk edge, an object moved
	// to another key, one sealed with another key.
	damage := map[string]string{}
	big := "objects/size-" + fmt.Sprint(3*sealed.ChunkSize+77)
	env, err := fs.Get(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	put := func(k string, b []byte, why string) {
		if err := fs.Put(ctx, k, b); err != nil {
			t.Fatal(err)
		}
		damage[k] = why
	}
	flipped := bytes.Clone(env)
	flipped[len(flipped)-100] ^= 1
	put("bad/flipped", flipped, "does not authenticate")
	put("bad/cut", env[:sealed.HeaderSize+2*(sealed.ChunkSize+sealed.TagSize)], "does not authenticate")
	put("bad/moved", env, "does not authenticate")
	other, _ := sealed.NewKeyring(mustKey(t))
	oenv, err := sealed.New(nil, other).Seal("bad/otherkey", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	put("bad/otherkey", oenv, "unknown key")

	out, err = exec.CommandContext(ctx, py, "sealed.py", keyFile, root).CombinedOutput()
	if err != nil {
		t.Fatalf("sealed.py: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, rest, _ := strings.Cut(line, " ")
		got[k] = rest
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if w := fmt.Sprintf("%d %x", len(want[k]), sha256.Sum256(want[k])); got[k] != w {
			t.Errorf("%s: sealed.py says %q, the Go reader %q", k, got[k], w)
		}
	}
	for k, why := range damage {
		if !strings.HasPrefix(got[k], "FAIL") || !strings.Contains(got[k], why) {
			t.Errorf("%s: sealed.py says %q, want FAIL: %s", k, got[k], why)
		}
	}
	if len(got) != len(want)+len(damage) {
		t.Errorf("sealed.py read %d objects, the remote has %d", len(got), len(want)+len(damage))
	}
	t.Logf("sealed.py opened %d objects (%d of a remote log) as the Go reader does, and refused %d damaged", len(want), len(objs)-6, len(damage))
}

func mustKey(t *testing.T) sealed.Key {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	k, err := sealed.NewKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
