package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runScript records a run whose command is a shell script printing lines.
func runScript(t *testing.T, log, name, script string) int {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	return run(log, name, []string{sh, "-c", script})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// Every test and subtest of every run counts; a package that failed outside its
// tests (a build error) and a run that exited non-zero without a failing test each
// count as one failure, with their output; the summary line is the last line.
func TestReportCountsEveryRun(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.json")
	if code := runScript(t, log, "all", `cat <<'X'
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"ok output\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB/sub","Output":"    b_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"p","Test":"TestB/sub","Elapsed":0}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":0}
{"Action":"skip","Package":"p","Test":"TestC","Elapsed":0}
{"Action":"fail","Package":"p","Elapsed":0.2}
{"ImportPath":"q [q.test]","Action":"build-output","Output":"q/q_test.go:3:1: syntax error\n"}
{"ImportPath":"q [q.test]","Action":"build-fail"}
{"Action":"start","Package":"q"}
{"Action":"output","Package":"q","Output":"FAIL\tq [build failed]\n"}
{"Action":"fail","Package":"q","Elapsed":0,"FailedBuild":"q [q.test]"}
X
exit 1`); code != 1 {
		t.Fatalf("run exit %d, want 1", code)
	}
	if code := runScript(t, log, "race", `echo '{"Action":"pass","Package":"r","Test":"TestR"}'; echo 'flag provided but not defined: -bogus' >&2; exit 2`); code != 2 {
		t.Fatalf("run exit %d, want 2", code)
	}
	if code := runScript(t, log, "otel", `echo '{"Action":"pass","Package":"o","Test":"TestO"}'; echo '{"Action":"pass","Package":"o"}'`); code != 0 {
		t.Fatalf("run exit %d, want 0", code)
	}
	var out strings.Builder
	if code := report(log, &out); code != 1 {
		t.Fatalf("report exit %d, want 1", code)
	}
	s := out.String()
	if got := lastLine(s); got != "3 passed, 4 failed, 1 skipped" {
		t.Fatalf("summary %q, want %q; report:\n%s", got, "3 passed, 4 failed, 1 skipped", s)
	}
	for _, want := range []string{"TestB/sub (p, all)", "want 1, got 2", "package q (all)", "syntax error", "go test (race) exited with status 2"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

// A clean run reports no failure and exits 0; no skipped part when nothing skipped.
func TestReportAllPassed(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.json")
	runScript(t, log, "all", `echo '{"Action":"pass","Package":"p","Test":"TestA"}'; echo 'not json'`)
	var out strings.Builder
	if code := report(log, &out); code != 0 || out.String() != "1 passed, 0 failed\n" {
		t.Fatalf("exit %d, report %q", code, out.String())
	}
	if _, err := os.Stat(log); err != nil {
		t.Fatal(err)
	}
}
