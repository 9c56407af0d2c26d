package secrets_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/secrets"
)

func TestRefuseFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--llm-api-key", "sk-Zq7secret"},
		{"-llm-api-key", "sk-Zq7secret"},
		{"--llm-model", "m", "--llm-api-key=sk-Zq7secret"},
		{"-llm-api-key=sk-Zq7secret"},
	} {
		err := secrets.RefuseFlag(args, "llm-api-key", "OPENAI_API_KEY", "llm-api-key-file")
		if err == nil || strings.Contains(err.Error(), "Zq7secret") ||
			!strings.Contains(err.Error(), "OPENAI_API_KEY") || !strings.Contains(err.Error(), "--llm-api-key-file FILE") {
			t.Errorf("RefuseFlag(%q) = %v", args, err)
		}
	}
	for _, args := range [][]string{
		nil,
		{"--llm-api-key-file", "/k"},
		{"--llm-model", "llm-api-key"},
		{"--", "--llm-api-key", "x"},
	} {
		if err := secrets.RefuseFlag(args, "llm-api-key", "OPENAI_API_KEY", "llm-api-key-file"); err != nil {
			t.Errorf("RefuseFlag(%q) = %v, want nil", args, err)
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := secrets.ReadFile(write("key", "sk-Zq7secret\n")); err != nil || got != "sk-Zq7secret" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	for name, content := range map[string]string{"empty": " \n", "two lines": "sk-Zq7secret\nsk-Zq7secret2\n",
		"big": strings.Repeat("sk-Zq7secret", 10000)} {
		if _, err := secrets.ReadFile(write(name, content)); err == nil || strings.Contains(err.Error(), "Zq7secret") {
			t.Errorf("%s: %v; want an error without the content", name, err)
		}
	}
	if _, err := secrets.ReadFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}
