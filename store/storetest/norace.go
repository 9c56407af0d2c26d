//go:build !race

package storetest

// modelSequences: the plain run replays 2,000 model walks through each backend.
const modelSequences = 2000
