package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKey writes a fresh key to a file of mode 0600 in the form asked
// ("raw", "hex" or "base64") and returns its path and its bytes.
func writeKey(t *testing.T, form string) (string, []byte) {
	t.Helper()
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	b := raw
	switch form {
	case "hex":
		b = []byte(hex.EncodeToString(raw) + "\n")
	case "base64":
		b = []byte(base64.StdEncoding.EncodeToString(raw) + "\n")
	}
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, raw
}

// keysOf runs `remote keys` and returns the objects of each key id and
// the report's total.
func keysOf(t *testing.T, args ...string) (map[string]int, int) {
	t.Helper()
	out, stderr, err := run(t, "", append(args, "remote", "keys")...)
	if err != nil {
		t.Fatalf("remote keys: %v (%s)", err, stderr)
	}
	var r keysReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("remote keys: %q: %v", out, err)
	}
	m := map[string]int{}
	for _, k := range r.Keys {
		if k.Objects > 0 {
			m[k.ID] = k.Objects
		}
	}
	if r.NotSealed != 0 {
		t.Fatalf("remote keys: %d objects not encrypted", r.NotSealed)
	}
	return m, r.Objects
}

// keyID is the id `remote keys` shows for the key in file.
func keyID(t *testing.T, file string) string {
	t.Helper()
	ring, err := (&globals{remoteKeyFile: file}).keyring()
	if err != nil {
		t.Fatal(err)
	}
	return ring.WriteID().String()
}

// TestCLIKeyRotation: push with key A; a data dir with no key, or with
// key B alone, cannot pull (typed errors: encrypted, unknown key); rotate
// to B with A kept for reading and push more; `remote keys` counts both;
// `remote reseal` moves A's objects to B; then A leaves the keyring and
// B alone pulls and hydrates everything.
func TestCLIKeyRotation(t *testing.T) {
	a := t.TempDir()
	remoteURL := "file://" + filepath.Join(t.TempDir(), "remote")
	keyA, _ := writeKey(t, "hex")
	keyB, _ := writeKey(t, "base64")
	idA, idB := keyID(t, keyA), keyID(t, keyB)
	withA := []string{"--remote", remoteURL, "--remote-key-file", keyA}
	rotated := []string{"--remote", remoteURL, "--remote-key-file", keyB, "--remote-old-key-file", keyA}
	withB := []string{"--remote", remoteURL, "--remote-key-file", keyB}

	commitTo(t, a, "vol.k", 50, "a")
	volumeJSON(t, append(append([]string{"--data", a}, withA...), "volume", "push", "vol.k")...)
	if m, n := keysOf(t, withA...); m[idA] != n || n == 0 {
		t.Fatalf("after a push with key A: %v of %d objects", m, n)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--remote", remoteURL}, "encrypted"},
		{withB, "lacks"},
	} {
		_, _, err := run(t, "", append(append([]string{"--data", t.TempDir()}, tc.args...), "volume", "pull", "vol.k")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("pull with %v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}

	commitTo(t, a, "vol.k", 20, "b")
	volumeJSON(t, append(append([]string{"--data", a}, rotated...), "volume", "push", "vol.k")...)
	m, n := keysOf(t, rotated...)
	if m[idA] == 0 || m[idB] == 0 || m[idA]+m[idB] != n {
		t.Fatalf("after the rotation: %v of %d objects", m, n)
	}
	// A data dir with both keys reads everything.
	b := t.TempDir()
	volumeJSON(t, append(append([]string{"--data", b}, rotated...), "volume", "pull", "vol.k")...)
	if h := volumeJSON(t, append(append([]string{"--data", b}, rotated...), "volume", "hydrate", "vol.k")...); h["unfetched_frames"] != 0.0 {
		t.Fatalf("hydrate with B and A: %v", h)
	}
	if _, _, err := run(t, "", append([]string{"--data", t.TempDir()}, append(withB, "remote", "reseal")...)...); err == nil {
		t.Fatal("reseal with B alone, A's objects left: no error")
	}
	out, stderr, err := run(t, "", append(rotated, "remote", "reseal")...)
	if err != nil {
		t.Fatalf("reseal: %v (%s)", err, stderr)
	}
	var res struct{ Checked, Resealed int }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Resealed != m[idA] || res.Checked != n {
		t.Fatalf("reseal: %s (%v), want %d of %d resealed", out, err, m[idA], n)
	}
	if m, n := keysOf(t, withB...); m[idA] != 0 || m[idB] != n {
		t.Fatalf("after reseal: %v of %d objects", m, n)
	}
	// A can go: B alone pulls and hydrates every page, and pushes on.
	c := t.TempDir()
	p := volumeJSON(t, append(append([]string{"--data", c}, withB...), "volume", "pull", "vol.k")...)
	if p["pages"] != 50.0 {
		t.Fatalf("pull with B alone: %v", p)
	}
	if h := volumeJSON(t, append(append([]string{"--data", c}, withB...), "volume", "hydrate", "vol.k")...); h["unfetched_frames"] != 0.0 {
		t.Fatalf("hydrate with B alone: %v", h)
	}
	commitTo(t, a, "vol.k", 5, "c")
	volumeJSON(t, append(append([]string{"--data", a}, withB...), "volume", "push", "vol.k")...)
	// The key in ECHOSTORE_REMOTE_KEY works as the file does.
	kb, err := os.ReadFile(keyB)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ECHOSTORE_REMOTE_KEY", strings.TrimSpace(string(kb)))
	volumeJSON(t, "--data", t.TempDir(), "--remote", remoteURL, "volume", "pull", "vol.k")
}

// TestRemoteKeyRefused: a key file or ECHOSTORE_REMOTE_KEY that holds no
// key, a missing key file, and old keys without a write key exit 2, for
// serve (flag or configuration file) and the commands that open the
// remote, before anything is created or contacted (Redis is a dead port),
// and no output shows the file's bytes.
func TestRemoteKeyRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, _ := writeKey(t, "raw")
	secret := "SECRETKEYMATERIAL" + strings.Repeat("7", 47) // 64 characters, not hex
	bad := map[string]string{
		"not hex":       write("nothex", []byte(secret)),
		"31 bytes":      write("short", []byte(strings.Repeat("k", 31))),
		"two lines":     write("lines", []byte(hex.EncodeToString(make([]byte, 32))+"\n"+secret+"\n")),
		"empty":         write("empty", nil),
		"a missing one": filepath.Join(dir, "nosuch"),
	}
	world := write("world", []byte(hex.EncodeToString(make([]byte, 32))))
	if err := os.Chmod(world, 0o644); err != nil {
		t.Fatal(err)
	}
	bad["readable by every user"] = world
	dead := "redis://" + deadAddr(t) + "/0"
	cmds := [][]string{
		{"serve", "--listen", "127.0.0.1:0"},
		{"volume", "push", "v"},
		{"archive", "cycle", "q", "s", "--keep", "5"},
		{"remote", "reseal"},
		{"remote", "keys"},
	}
	check := func(what string, args []string) {
		t.Helper()
		data := filepath.Join(t.TempDir(), "data")
		out, code := execOut(t, append([]string{"--redis", dead, "--data", data}, args...)...)
		if code != 2 || !strings.Contains(out, "key") || strings.Contains(out, "SECRETKEY") || strings.Contains(out, "panic") {
			t.Errorf("%s: %v: exit %d, %q; want exit 2 naming the key", what, args, code, out)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v: the data dir was created", what, args)
		}
	}
	for what, f := range bad {
		for _, c := range cmds {
			check(what, append([]string{"--remote-key-file", f}, c...))
			check(what+" (old key)", append([]string{"--remote-key-file", good, "--remote-old-key-file", f}, c...))
		}
		cfg := write("serve.yaml", []byte("remote_key_file: "+f+"\n"))
		check(what+" (config)", []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"})
		// An empty variable does not replace the file's key with none.
		t.Setenv("ECHOSTORE_REMOTE_KEY_FILE", "")
		check(what+" (config, empty ECHOSTORE_REMOTE_KEY_FILE)", []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"})
		os.Unsetenv("ECHOSTORE_REMOTE_KEY_FILE")
	}
	for _, c := range cmds {
		check("old keys without a write key", append([]string{"--remote-old-key-file", good}, c...))
	}
	t.Setenv("ECHOSTORE_REMOTE_KEY", secret)
	for _, c := range cmds {
		check("ECHOSTORE_REMOTE_KEY", c)
	}
}

// TestCLIEncryptExistingRemote: a remote pushed without a key is refused
// by a data dir with one (not encrypted: a typed error); `remote reseal`
// encrypts its every object in place; then the key pulls and hydrates it
// and pushes on, and a data dir without the key is refused.
func TestCLIEncryptExistingRemote(t *testing.T) {
	a := t.TempDir()
	remoteURL := "file://" + filepath.Join(t.TempDir(), "remote")
	key, _ := writeKey(t, "hex")
	withKey := []string{"--remote", remoteURL, "--remote-key-file", key}
	commitTo(t, a, "vol.e", 30, "a")
	volumeJSON(t, "--data", a, "--remote", remoteURL, "volume", "push", "vol.e")
	if _, _, err := run(t, "", append(append([]string{"--data", t.TempDir()}, withKey...), "volume", "pull", "vol.e")...); err == nil || !strings.Contains(err.Error(), "not encrypted") {
		t.Fatalf("pull of a plaintext remote with a key: %v", err)
	}
	out, stderr, err := run(t, "", append(withKey, "remote", "reseal")...)
	if err != nil {
		t.Fatalf("reseal: %v (%s)", err, stderr)
	}
	var res struct{ Checked, Resealed, Encrypted int }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Encrypted == 0 || res.Encrypted != res.Checked || res.Resealed != 0 {
		t.Fatalf("reseal of a plaintext remote: %s (%v)", out, err)
	}
	if m, n := keysOf(t, withKey...); m[keyID(t, key)] != n {
		t.Fatalf("after reseal: %v of %d objects", m, n)
	}
	b := t.TempDir()
	if p := volumeJSON(t, append(append([]string{"--data", b}, withKey...), "volume", "pull", "vol.e")...); p["pages"] != 30.0 {
		t.Fatalf("pull with the key: %v", p)
	}
	if h := volumeJSON(t, append(append([]string{"--data", b}, withKey...), "volume", "hydrate", "vol.e")...); h["unfetched_frames"] != 0.0 {
		t.Fatalf("hydrate with the key: %v", h)
	}
	commitTo(t, a, "vol.e", 5, "b")
	// A push without the key is refused before it writes anything.
	if _, _, err := run(t, "", "--data", a, "--remote", remoteURL, "volume", "push", "vol.e"); err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Fatalf("push without the key: %v", err)
	}
	if m, n := keysOf(t, withKey...); m[keyID(t, key)] != n {
		t.Fatalf("after a push without the key: %v of %d objects", m, n)
	}
	volumeJSON(t, append(append([]string{"--data", a}, withKey...), "volume", "push", "vol.e")...)
	if _, _, err := run(t, "", "--data", t.TempDir(), "--remote", remoteURL, "volume", "pull", "vol.e"); err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Fatalf("pull without the key: %v", err)
	}
}
