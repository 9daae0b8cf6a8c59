package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/graft/remote"
)

// tempPrefix starts the name of every temporary file of a Store. Keys
// cannot have a segment starting with '.', so temporaries never collide with
// or list as objects.
const tempPrefix = ".tmp-"

// Store is a remote.Store in a local directory, atomic and durable across
// processes: PutIfAbsent writes a temporary file in the target folder,
// fsyncs it, link(2)s it into place (link fails with EEXIST if the key
// exists), removes the temporary and fsyncs the folder. Put renames instead
// of linking. A crash leaves at most a stale temporary (see Sweep), never a
// partial object at a key. The directory itself is trusted: symbolic links
// placed inside it are followed.
type Store struct {
	root string
}

var _ remote.Store = (*Store)(nil)

// Open opens a Store in dir. It creates nothing: the folder
// is made by the first write, so that a read (or a mistyped URL) never
// leaves one behind; until then the store is empty. A dir that exists and
// is not a folder is refused, wrapping remote.ErrBadURL.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file store %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("file store %s: not a folder: %w", abs, remote.ErrBadURL)
	}
	return &Store{root: abs}, nil
}

// Dir returns the store's absolute directory.
func (s *Store) Dir() string { return s.root }

func (s *Store) path(key string) (string, error) {
	if err := remote.CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// PutIfAbsent implements remote.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.write(ctx, key, data, true)
}

// Put implements remote.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return s.write(ctx, key, data, false)
}

func (s *Store) write(ctx context.Context, key string, data []byte, exclusive bool) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := mkdirAllSync(dir); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	tmp, err := writeTemp(dir, data)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if exclusive {
		err = os.Link(tmp, p)
		_ = os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
				return fmt.Errorf("put %s: a folder of other keys is in the way: %w", key, remote.ErrBadKey)
			}
			return fmt.Errorf("put %s: %w", key, remote.ErrExists)
		}
	} else {
		err = os.Rename(tmp, p)
		if err != nil {
			_ = os.Remove(tmp)
		}
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// writeTemp writes data to a new fsynced temporary file in dir.
func writeTemp(dir string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// Get implements remote.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, mapNotFound(err))
	}
	return b, nil
}

// GetRange implements remote.Store with one pread.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get %s: range at %d of %d bytes: %w", key, off, n, remote.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, mapNotFound(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if end := fi.Size() - off; end < n {
		n = max(end, 0)
	}
	buf := make([]byte, n)
	m, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("get %s: %w", key, mapNotFound(err))
	}
	return buf[:m], nil
}

func mapNotFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w (%v)", remote.ErrNotFound, err)
	}
	return err
}

// List implements remote.Store. It reads the folders under the longest folder the
// prefix names.
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]remote.ObjectInfo, error) {
	if err := remote.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	base := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	// Collect keys first and stat only those kept: a head lookup reads the
	// log folder's names but stats one file.
	type entry struct{ key, path string }
	var found []entry
	err := walk(ctx, base, func(p string, d fs.DirEntry) error {
		if strings.HasPrefix(d.Name(), ".") && p != base {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			found = append(found, entry{key, p})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].key < found[j].key })
	out := make([]remote.ObjectInfo, 0, len(found))
	for _, f := range found {
		if limit > 0 && len(out) == limit {
			break
		}
		fi, err := os.Lstat(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		} else if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		out = append(out, remote.ObjectInfo{Key: f.key, Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return out, nil
}

// Delete implements remote.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := durable.SyncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// Close implements remote.Store; a Store holds no resources.
func (s *Store) Close() error { return nil }

// Sweep removes temporary files older than age that crashed writers left
// behind, and returns how many it removed. Temporaries younger than age may
// belong to a write in progress in another process.
func (s *Store) Sweep(ctx context.Context, age time.Duration) (int, error) {
	cutoff := time.Now().Add(-age)
	n := 0
	err := walk(ctx, s.root, func(p string, d fs.DirEntry) error {
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			n++
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("sweep %s: %w", s.root, err)
	}
	return n, nil
}

// walk calls fn for every entry under root (root included), skipping
// entries that vanish during the walk and stopping when ctx is done.
func walk(ctx context.Context, root string, fn func(p string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(p, d)
	})
}

// mkdirAllSync creates dir and its missing parents, fsyncing each parent
// whose entries changed, so that a new folder survives a crash.
func mkdirAllSync(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a folder", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return durable.SyncDir(parent)
}
