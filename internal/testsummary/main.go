// Command testsummary runs `go test -json` commands for scripts/test.sh, shows
// their progress readably, and ends the script with one summary line:
//
//	testsummary run LOG NAME -- go test -json ARGS...   # run one go test, append its events to LOG
//	testsummary report LOG                               # the failures again, then "N passed, N failed[, N skipped]"
//
// run prints each package's result as it ends and each failing test's output as
// it fails, and exits with the command's status. report counts every test and
// subtest of every run in LOG; a package that failed with no failing test (a build
// error, a panic outside a test, a timeout) counts as one failed test, and so
// does a run that exited non-zero without reporting any failure. report exits 1
// when anything failed.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json), plus the records run adds.
type event struct {
	Time        time.Time `json:",omitempty"`
	Action      string
	Package     string  `json:",omitempty"`
	Test        string  `json:",omitempty"`
	Elapsed     float64 `json:",omitempty"`
	Output      string  `json:",omitempty"`
	ImportPath  string  `json:",omitempty"`
	FailedBuild string  `json:",omitempty"`
	// Run names the go test run (set by run on every event it records).
	Run string `json:",omitempty"`
	// Exit is the run's exit status (Action "run-exit").
	Exit int `json:",omitempty"`
}

func main() {
	if len(os.Args) >= 6 && os.Args[1] == "run" && os.Args[4] == "--" {
		os.Exit(run(os.Args[2], os.Args[3], os.Args[5:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "report" {
		os.Exit(report(os.Args[2], os.Stdout))
	}
	fmt.Fprintln(os.Stderr, "usage: testsummary run LOG NAME -- go test -json ARGS... | testsummary report LOG")
	os.Exit(2)
}

func run(logPath, name string, argv []string) int {
	logf, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 2
	}
	defer logf.Close()
	record := json.NewEncoder(logf)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 2
	}
	fmt.Printf("=== %s: %s\n", name, strings.Join(argv, " "))
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		_ = record.Encode(event{Action: "run-exit", Run: name, Exit: 127, Output: err.Error()})
		return 127
	}
	f := newFollower(os.Stdout)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Printf("%s\n", line) // not an event: go test's own words
			continue
		}
		e.Run = name
		_ = record.Encode(e)
		f.add(e)
	}
	code := 0
	if err := cmd.Wait(); err != nil {
		var x *exec.ExitError
		if !errors.As(err, &x) {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			code = 2
		} else {
			code = x.ExitCode()
		}
	}
	_ = record.Encode(event{Action: "run-exit", Run: name, Exit: code})
	return code
}

// follower prints a readable account of one run's events as they come.
type follower struct {
	w      io.Writer
	output map[string][]string // package\x00test -> output so far
	build  map[string][]string // import path -> build output
}

func newFollower(w io.Writer) *follower {
	return &follower{w: w, output: map[string][]string{}, build: map[string][]string{}}
}

func (f *follower) add(e event) {
	id := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output":
		f.build[e.ImportPath] = append(f.build[e.ImportPath], e.Output)
	case "build-fail":
		fmt.Fprintf(f.w, "FAIL\t%s [build failed]\n%s", e.ImportPath, strings.Join(f.build[e.ImportPath], ""))
		delete(f.build, e.ImportPath)
	case "output":
		f.output[id] = append(f.output[id], e.Output)
	case "pass", "skip":
		if e.Test == "" && e.Action == "pass" {
			fmt.Fprintf(f.w, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
		}
		delete(f.output, id)
	case "fail":
		if e.Test != "" {
			fmt.Fprintf(f.w, "--- FAIL: %s (%s, %.2fs)\n%s", e.Test, e.Package, e.Elapsed, strings.Join(f.output[id], ""))
		} else {
			fmt.Fprintf(f.w, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
		}
		delete(f.output, id)
	}
}

// result is one test's (or one failed package's, or one run's) outcome.
type result struct {
	name   string
	output []string
}

func report(logPath string, w io.Writer) int {
	data, err := os.ReadFile(logPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 2
	}
	var passed, skipped int
	var failed []result
	output := map[string][]string{}    // run\x00package\x00test -> output
	build := map[string][]string{}     // run\x00import path -> build output
	pkgFailedTests := map[string]int{} // run\x00package -> failed tests
	runFailures := map[string]int{}    // run -> failures counted
	for _, line := range strings.Split(string(data), "\n") {
		var e event
		if strings.TrimSpace(line) == "" || json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		pkg := e.Run + "\x00" + e.Package
		id := pkg + "\x00" + e.Test
		switch e.Action {
		case "output":
			output[id] = append(output[id], e.Output)
		case "build-output":
			build[e.Run+"\x00"+e.ImportPath] = append(build[e.Run+"\x00"+e.ImportPath], e.Output)
		case "pass":
			if e.Test != "" {
				passed++
			}
			delete(output, id)
		case "skip":
			if e.Test != "" {
				skipped++
			}
			delete(output, id)
		case "fail":
			switch {
			case e.Test != "":
				failed = append(failed, result{name: fmt.Sprintf("%s (%s, %s)", e.Test, e.Package, e.Run), output: output[id]})
				pkgFailedTests[pkg]++
				runFailures[e.Run]++
			case pkgFailedTests[pkg] == 0:
				out := output[id]
				if e.FailedBuild != "" {
					out = append(build[e.Run+"\x00"+e.FailedBuild], out...)
				}
				failed = append(failed, result{name: fmt.Sprintf("package %s (%s): failed outside any test", e.Package, e.Run), output: out})
				runFailures[e.Run]++
			}
			delete(output, id)
		case "run-exit":
			if e.Exit != 0 && runFailures[e.Run] == 0 {
				failed = append(failed, result{name: fmt.Sprintf("go test (%s) exited with status %d and reported no failing test; its error output is above", e.Run, e.Exit)})
				runFailures[e.Run]++
			}
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\n%d failed:\n", len(failed))
		for _, r := range failed {
			fmt.Fprintf(w, "\n--- FAIL: %s\n", r.name)
			for _, l := range r.output {
				fmt.Fprint(w, "    ", l)
				if !strings.HasSuffix(l, "\n") {
					fmt.Fprintln(w)
				}
			}
		}
		fmt.Fprintln(w)
	}
	line := fmt.Sprintf("%d passed, %d failed", passed, len(failed))
	if skipped > 0 {
		line += fmt.Sprintf(", %d skipped", skipped)
	}
	fmt.Fprintln(w, line)
	if len(failed) > 0 {
		return 1
	}
	return 0
}
