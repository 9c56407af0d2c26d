package idemhttp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileFromAnotherModule: the docs invite users to write a profile for their
// own vendor, so a module that is not this one (and so cannot import its internal
// packages) must be able to fill in every field of a Profile, Answer.Outcome too.
func TestProfileFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/acme\n\ngo 1.26\n\nrequire github.com/idemgate/idemgate v0.0.0\n\n" +
			"replace github.com/idemgate/idemgate => " + root + "\n",
		"acme.go": `package acme

import (
	"time"

	"github.com/idemgate/idemgate/idemhttp"
)

// Profile is Acme's idempotency profile.
var Profile = idemhttp.Profile{
	Name: "acme", Where: idemhttp.InHeader, Field: "Acme-Request-Key", MaxLen: 64,
	Dedupes: true, Window: 48 * time.Hour,
	Answers: []idemhttp.Answer{
		{Status: 409, Code: "request_in_progress", Outcome: idemhttp.InFlight},
		{Status: 422, Code: "key_reused", Outcome: idemhttp.Conflict},
		{Status: 409, Code: "already_done", Outcome: idemhttp.Committed, Replayed: true},
		{Status: 400, Outcome: idemhttp.Rejected},
		{Status: 503, Outcome: idemhttp.Unknown},
	},
}

var _ idemhttp.Outcome = idemhttp.NotSent
`,
	}
	// The module's go.sum, as a real module that requires idemgate would have it
	// (idemhttp's witness imports Temporal's API types; GOPROXY is off here).
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sum)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a profile written in another module does not compile: %v\n%s", err, strings.TrimSpace(string(out)))
	}
}
