//go:build idemgate_faults

package faultpoint

import (
	"os"
	"syscall"
)

// Enabled reports whether this binary was built with fault injection.
const Enabled = true

var killAt = os.Getenv(Env)

// Hit kills this process with SIGKILL when IDEMGATE_KILL_AT names point.
func Hit(point string) {
	if killAt == "" || point != killAt {
		return
	}
	_, _ = os.Stderr.WriteString("faultpoint: " + point + "\n")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not delivered synchronously; never run on past the point.
}
