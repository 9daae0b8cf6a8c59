package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/echostore/echostore"
)

// serveTokenName is the file in the data dir that holds serve's admin
// token when no token is given (docs/SERVE.md, Tokens and scopes).
const serveTokenName = echostore.TokenFile

// serveTokenBytes is how many random bytes a new serve.token holds (hex
// encoded: 64 characters).
const serveTokenBytes = 32

// errServeToken: the data dir's serve.token cannot be used (its mode, its
// type, its content); serve refuses to start.
var errServeToken = errors.New("serve.token")

// dataDirToken returns the admin token kept in <data>/serve.token, making
// the file on first use: 32 random bytes, hex, mode 0600, written to a
// temporary file, synced, then linked into place (so that it never exists
// half-written, and a token another start made meanwhile is not replaced)
// and the directory synced. A file that another user than its owner may
// read or write (any group or other permission bit), or that is not a
// regular file, is refused. Errors name the file, never the token.
func dataDirToken(data string) (value, path string, created bool, err error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", "", false, fmt.Errorf("create data dir %s: %w", data, err)
	}
	path = filepath.Join(data, serveTokenName)
	for range 2 {
		v, err := readServeToken(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return v, path, false, err
		}
		err = createServeToken(data, path)
		if errors.Is(err, fs.ErrExist) {
			continue // another start made it first: use its token
		}
		if err != nil {
			return "", path, false, err
		}
		v, err = readServeToken(path)
		return v, path, err == nil, err
	}
	return "", path, false, fmt.Errorf("%w: %s: appeared and vanished while serve started: start it again", errServeToken, path)
}

// readServeToken reads an existing serve.token, checking its mode first.
func readServeToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("%w: %w", errServeToken, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file (mode %v): remove it, and serve makes a new token", errServeToken, path, fi.Mode())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%w: %s holds serve's admin token and has mode %v, which lets other users of the machine at it: chmod 600 %s (or remove it, and serve makes a new token)",
			errServeToken, path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errServeToken, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("%w: %s is empty: remove it, and serve makes a new token", errServeToken, path)
	}
	return v, nil
}

// createServeToken writes a new token to path, failing with fs.ErrExist
// if a file is already there.
func createServeToken(dir, path string) (err error) {
	raw := make([]byte, serveTokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("%w: random bytes: %w", errServeToken, err)
	}
	tmp, err := os.CreateTemp(dir, "."+serveTokenName+".*") // mode 0600
	if err != nil {
		return fmt.Errorf("%w: %w", errServeToken, err)
	}
	defer os.Remove(tmp.Name()) // the link, if made, keeps the file
	_, err = tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: write %s: %w", errServeToken, tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fs.ErrExist
		}
		return fmt.Errorf("%w: %w", errServeToken, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: sync %s: %w", errServeToken, dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", errServeToken, dir, err)
	}
	return nil
}
