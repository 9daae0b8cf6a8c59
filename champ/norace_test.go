//go:build !race

package champ

// raceEnabled: the race detector slows the large tests tenfold.
const raceEnabled = false
