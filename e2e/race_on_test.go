//go:build race

package e2e

// raceEnabled builds the gateway binary with the race detector when the tests run with it, so
// the concurrency tests also check the server for data races.
const raceEnabled = true
