//go:build race

package sim_test

// raceEnabled scales the runs down under the race detector, which makes
// every step some ten times slower.
const raceEnabled = true
