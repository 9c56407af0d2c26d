// Package secrets keeps secrets out of what idemgate prints.
//
// Redact is the module's one redaction: every message, log line and error that
// shows a store DSN or a URL (a PostgreSQL spec, an MCP server, a vendor or model
// API root) goes through it, and Scrub / ScrubError hide the secrets of a spec
// that an error from net/url, net/http or a driver echoes in another form.
//
// It also keeps secrets off the command line, where every user of the machine
// can read them in the process list (ps, /proc/PID/cmdline): a secret comes from
// the environment or from a file, and a flag that would carry one is refused
// before the flags are parsed, without echoing its value.
package secrets

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSize bounds a secret file: an API key is short; a bigger file is the wrong one.
const maxSize = 64 << 10

// RefuseFlag returns an error when args set the flag name (-name, --name,
// --name=value) before a "--". The error names the flag and the ways to give the
// secret (the environment variable env, or the flag fileFlag naming a file) and
// never contains the value.
func RefuseFlag(args []string, name, env, fileFlag string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		n, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if n == name {
			return fmt.Errorf("idemgate/internal/secrets: --%s is refused: a secret on the command line is visible to every user in the process list. "+
				"Set %s in the environment, or put the key in a file only you can read and pass --%s FILE", name, env, fileFlag)
		}
	}
	return nil
}

// ReadFile returns the secret in the file at path, without surrounding
// whitespace (a trailing newline). The error names the file, never its content.
func ReadFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("idemgate/internal/secrets: cannot read the secret file: %w; give a readable file holding only the key", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return "", fmt.Errorf("idemgate/internal/secrets: cannot read the secret file %s: %w; give a readable file holding only the key", path, err)
	}
	if len(b) > maxSize {
		return "", fmt.Errorf("idemgate/internal/secrets: the secret file %s is over %d bytes: is it the right file? It should hold only the key", path, maxSize)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errors.New("idemgate/internal/secrets: the secret file " + path + " is empty; put the key in it")
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("idemgate/internal/secrets: the secret file %s holds more than one line; it should hold only the key", path)
	}
	return s, nil
}
