// Package file is the file:// remote driver: Store, an object store in a
// local directory that keeps the fence (remote.Store.PutIfAbsent) across
// processes with link(2), durable with fsync. It depends on the standard
// library alone.
package file

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/redact"
)

// Scheme is the URL scheme Driver opens.
const Scheme = "file"

// Driver opens file:// remote URLs: file:///abs/dir is /abs/dir,
// file://./rel/dir and file://rel/dir are relative to the working
// directory. A file URL takes no query, fragment or user.
type Driver struct{}

var _ remote.Driver = Driver{}

// Schemes implements remote.Driver.
func (Driver) Schemes() []string { return []string{Scheme} }

// Open implements remote.Driver; it creates nothing (see Open).
func (Driver) Open(_ context.Context, u *url.URL) (remote.Store, error) {
	dir, err := dirOf(u)
	if err != nil {
		return nil, fmt.Errorf("remote URL %s: %w", redact.URL(u.String()), err)
	}
	s, err := Open(dir)
	if err != nil {
		return nil, err // a *Store nil must not become a non-nil remote.Store
	}
	return s, nil
}

// dirOf returns the directory of a file:// URL.
func dirOf(u *url.URL) (string, error) {
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("file URLs take no query, fragment or user: %w", remote.ErrBadURL)
	}
	p := u.Path
	if u.Opaque != "" {
		return "", fmt.Errorf("file URL must be file://DIR: %w", remote.ErrBadURL)
	}
	if u.Host != "" && u.Host != "localhost" {
		p = u.Host + p
	}
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("file URL names no directory: %w", remote.ErrBadURL)
	}
	return p, nil
}
