//go:build race

package storetest

// modelSequences: under the race detector every store call runs many times slower,
// and the race run looks for data races in the backends, not for rule mismatches
// (the plain run replays 2,000 walks), so it replays the first 200 of the same walks.
const modelSequences = 200
