// Package web holds the dashboard of `echostore serve`: one embedded page,
// no external assets, that follows /v1/events and draws per stream the seam
// (archive | W | live tail) and per volume the local and remote LSN.
package web

import _ "embed"

// Index is the dashboard page.
//
//go:embed index.html
var Index []byte
