// Package web holds the dashboard of `echostore serve`: one embedded page,
// no external assets, that follows /v1/events and draws per stream the seam
// (archive | W | live tail) and per volume the local and remote LSN.
package web

import (
	"bytes"
	_ "embed"
)

// Index is the dashboard page as embedded: its fault control is hidden
// (Page(false)).
//
//go:embed index.html
var Index []byte

// faultsOff is the page's marker of a server without the fault route.
var faultsOff = []byte(`<meta name="echostore-faults" content="off">`)

// Page returns the dashboard page; faults shows its "inject fault"
// control, for a server whose configuration registers the fault route.
func Page(faults bool) []byte {
	if !faults {
		return Index
	}
	return bytes.Replace(Index, faultsOff, []byte(`<meta name="echostore-faults" content="on">`), 1)
}
