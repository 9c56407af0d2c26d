//go:build race

package claimmodel

// Under the race detector the model runs several times slower; the plain run
// explores deeper.
const defaultDepth = 5
