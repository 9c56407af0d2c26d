//go:build !race

package claimmodel

const defaultDepth = 6
