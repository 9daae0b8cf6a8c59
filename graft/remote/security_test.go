package remote

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore/names"
)

// TestSecurityKeysNeverLeaveTheRoot: no key a caller can pass — from a
// volume name, a segment id or a raw key — names a path outside a file://
// root or one of its temporaries; every bad one is refused with ErrBadKey
// or ErrInvalid before any file is touched.
func TestSecurityKeysNeverLeaveTheRoot(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "remote")
	fs, err := openFileStore(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, k := range []string{"", "../escape", "a/../../escape", "/abs", "a//b", "a/./b", ".tmp-x", "a/.tmp-x",
		"a\\..\\escape", "a\x00b", "a\nb", "\xff", "a/" + strings.Repeat("x", MaxKeyLen), "volumes/../../escape",
		"./a", "a/"} {
		if err := fs.Put(ctx, k, []byte("x")); !errors.Is(err, ErrBadKey) {
			t.Errorf("Put(%q) = %v, want ErrBadKey", k, err)
		}
		if err := fs.PutIfAbsent(ctx, k, []byte("x")); !errors.Is(err, ErrBadKey) {
			t.Errorf("PutIfAbsent(%q) = %v, want ErrBadKey", k, err)
		}
		if _, err := fs.Get(ctx, k); !errors.Is(err, ErrBadKey) {
			t.Errorf("Get(%q) = %v, want ErrBadKey", k, err)
		}
		if err := fs.Delete(ctx, k); !errors.Is(err, ErrBadKey) {
			t.Errorf("Delete(%q) = %v, want ErrBadKey", k, err)
		}
	}
	// Volume names are checked before a key is built from them.
	for _, v := range []string{"..", ".", "../x", "a/b", "x\x00", "é", "", strings.Repeat("v", 129)} {
		if _, err := names.ParseVolume(v); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseVolume(%q) = %v, want names.ErrInvalid (NewLog takes only a parsed names.Volume)", v, err)
		}
		if _, err := EncodeCommit(&Commit{Volume: v, LSN: 1, Inline: []Page{{Index: 0, Data: []byte("x")}}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("EncodeCommit(volume %q) = %v, want ErrInvalid", v, err)
		}
	}
	// A commit cannot point a reader at another volume's segment, or at a
	// key outside segments/<V>/.
	for _, seg := range []string{"segments/other/00112233445566778899aabbccddeeff", "segments/v/../../x", "volumes/v/log/0"} {
		c := &Commit{Volume: "v", LSN: 1, Segments: []SegmentRef{{Key: seg, Frames: []FrameRef{{Offset: 8, Length: 1, RawLength: 1, Pages: []PageLoc{{Index: 0, Length: 1}}}}}}}
		if _, err := EncodeCommit(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("commit with segment %q: %v, want ErrInvalid", seg, err)
		}
	}
	ents, err := os.ReadDir(parent)
	if err != nil || len(ents) > 1 || len(ents) == 1 && ents[0].Name() != "remote" { // the root is made by the first write
		t.Fatalf("the root's parent holds %v, %v", ents, err)
	}
	var n int
	filepath.Walk(root, func(string, os.FileInfo, error) error { n++; return nil })
	if n != 1 {
		t.Fatalf("%d entries under the root, want it empty", n-1)
	}
}

// TestSecurityRemoteURLSecretsNotEchoed: credentials do not belong in a
// remote URL (every SDK takes them from its environment: AWS_ACCESS_KEY_ID
// …); one written there anyway, in the user part or the query, is refused
// and does not appear in the error, which reaches logs and terminals.
func TestSecurityRemoteURLSecretsNotEchoed(t *testing.T) {
	const secret = "wJalrXUtnFEMIK7MDENG"
	for _, u := range []string{
		"s3://AKIAEXAMPLE:" + secret + "@bucket",
		"s3://bucket?aws_secret_access_key=" + secret,
		"s3://bucket?secret=" + secret + "&region=us-east-1",
		"ftp://user:" + secret + "@host/x",
		"file://user:" + secret + "@/tmp/x",
		"s3://user:" + secret + "@bucket/%zz",
		"://user:" + secret + "@x",
	} {
		st, err := Open(t.Context(), u, testDrivers...)
		if err == nil {
			st.Close()
			t.Errorf("Open(%q) accepted credentials in the URL", u)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q): the error shows the secret: %v", u, err)
		}
	}
}
