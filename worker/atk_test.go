package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// More forms of MCP server credentials the worker must not print: a token as the
// URL's user name, and a stdio server's command with a secret flag; and a store
// DSN whose postgres:// was forgotten.
func TestWorkerNeverPrintsMoreCredentials(t *testing.T) {
	const pw = "Zq7PW4x"
	urls := []string{"--docs-url", "http://127.0.0.1:9/d", "--crm-url", "http://127.0.0.1:9/c", "--tickets-url", "http://127.0.0.1:9/t",
		"--payments-url", "http://127.0.0.1:9/p", "--email-url", "http://127.0.0.1:9/e", "--chat-url", "http://127.0.0.1:9/s"}
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"token as the user name": {"--store", filepath.Join(dir, "a.db"), "--mcp", "crm=http://ghp_" + pw + "@127.0.0.1:1/mcp"},
		"stdio command with --api-key": {"--store", filepath.Join(dir, "b.db"), "--mcp",
			"crm=" + filepath.Join(dir, "no-such-server") + " --api-key sk_" + pw},
		"store without postgres://": {"--store", "app:" + pw + "@127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(append([]string{}, urls...), args...), &out, &errOut)
			all := out.String() + errOut.String()
			if code != 2 || strings.Contains(all, pw) {
				t.Fatalf("exit %d, output %q; want 2 and no credentials", code, all)
			}
		})
	}
}
