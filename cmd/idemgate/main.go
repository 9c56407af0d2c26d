package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/internal/storeopen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the operation failed or was refused; nothing changed
	exitUsage = 2
)

// cli is one invocation. Tests set what main takes from the process.
type cli struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	now            func() time.Time
	getenv         func(string) string
	// stop ends a long-running command (console); nil: Ctrl-C.
	stop <-chan struct{}
}

// usageError is bad input: exit code 2, with the command's usage. quiet: the flag
// package already printed the problem and the usage.
type usageError struct {
	msg   string
	quiet bool
}

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{msg: fmt.Sprintf(format, a...)} }

type command struct {
	name, synopsis string
	run            func(c *cli, args []string) error
}

var commands = []command{
	{"receipts", "list the append-only receipts; export and prune old ones", (*cli).receipts},
	{"pending", "list writes that wait on a witness or a person (owner gone with the outcome unknown, or refused while running)", (*cli).pending},
	{"resolve", "settle a pending key: --sent (with its result) or --not-sent", (*cli).resolve},
	{"pause", "stop every worker from running the writes of an activity or effect class", (*cli).pause},
	{"resume", "lift a pause", (*cli).resume},
	{"pauses", "list the pauses in force", (*cli).pauses},
	{"console", "serve the operator's web page: pending writes, their stories, settle and pause from a browser", (*cli).console},
	{"census", "classify activity names and flag those that need review", (*cli).census},
	{"sweep", "remove the records past their window, once", (*cli).sweep},
	{"reconcile", "ask Temporal's history about the pending keys and settle those it can tell", (*cli).reconcile},
}

// run is the whole command line: main calls it, tests call it.
// clock is the CLI's clock (tests move it to play a person who types later).
var clock = time.Now

func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, stdin: os.Stdin, now: clock, getenv: os.Getenv}
	return c.main(args)
}

func (c *cli) main(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		c.usage(c.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	i := slices.IndexFunc(commands, func(cmd command) bool { return cmd.name == args[0] })
	if i < 0 {
		fmt.Fprintf(c.stderr, "idemgate: unknown command %q. Commands: %s. Run `idemgate help`.\n", args[0], names())
		return exitUsage
	}
	err := commands[i].run(c, args[1:])
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue) && ue.quiet:
		return exitUsage
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "idemgate %s: %s\n", args[0], escape(ue.msg, false))
		fmt.Fprintf(c.stderr, "Run `idemgate %s --help` for its flags.\n", args[0])
		return exitUsage
	default:
		fmt.Fprintf(c.stderr, "idemgate %s: %s\n", args[0], escape(err.Error(), false))
		return exitFail
	}
}

func names() string {
	var n []string
	for _, cmd := range commands {
		n = append(n, cmd.name)
	}
	return strings.Join(n, ", ")
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintln(w, "idemgate: the operator's side of the idemgate claim store.")
	fmt.Fprintln(w, "\nUsage: idemgate COMMAND [flags]   (idemgate COMMAND --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cmd := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name, cmd.synopsis)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n--store takes a SQLite file path or a PostgreSQL DSN (postgres://...); default $IDEMGATE_STORE,")
	fmt.Fprintf(w, "else %s. --json prints JSON for scripts.\n", storeopen.DefaultPath)
}

// flags is a command's flag set with the flags every command shares.
type flags struct {
	*flag.FlagSet
	store   string
	json    bool
	noStore bool
}

func (c *cli) newFlags(name, args, about string, withStore bool) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), noStore: !withStore}
	f.SetOutput(escapeWriter{c.stderr})
	if withStore {
		def := c.getenv("IDEMGATE_STORE")
		if def == "" {
			def = storeopen.DefaultPath
		}
		f.StringVar(&f.store, "store", def, "the store: a SQLite file path or a PostgreSQL DSN (postgres://... or host=... dbname=...)")
		f.Lookup("store").DefValue = storeopen.Redact(def) // --help shows it: never the password
	}
	f.BoolVar(&f.json, "json", false, "print JSON")
	f.Usage = func() {
		fmt.Fprintf(c.stderr, "Usage: idemgate %s %s\n\n%s\n\nFlags:\n", name, args, about)
		f.PrintDefaults()
	}
	return f
}

// parse parses flags and positional arguments in any order ("resolve KEY --sent"
// as well as "resolve --sent KEY").
func (f *flags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			// The flag package printed the problem and the usage.
			return nil, usageError{msg: err.Error(), quiet: true}
		}
		args = f.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseNone parses args for a command that takes flags only.
func (f *flags) parseNone(args []string) error {
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return nil
}

// session opens the store named by --store for one command, under the command's
// timeout; done closes both.
func (c *cli) session(f *flags) (context.Context, storeopen.Store, func(), error) {
	return c.sessionFor(f, opTimeout)
}

// sessionFor is session under a timeout of its own.
func (c *cli) sessionFor(f *flags, timeout time.Duration) (context.Context, storeopen.Store, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	st, err := c.open(ctx, f)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, st, func() { st.Close(); cancel() }, nil
}

// open opens the store named by --store. A SQLite file that does not exist is an
// error: an operator pointed at the wrong path must not get a new, empty store.
func (c *cli) open(ctx context.Context, f *flags) (storeopen.Store, error) {
	spec := f.store
	if err := storeopen.Check(spec); err != nil {
		return nil, err
	}
	if !storeopen.IsPostgres(spec) {
		if _, err := os.Stat(spec); err != nil {
			return nil, fmt.Errorf("no store at %q (%v). Pass --store with the path of the worker's SQLite file or a "+
				"postgres:// DSN, or set IDEMGATE_STORE", spec, errors.Unwrap(err))
		}
	}
	st, err := storeopen.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	if w := storeopen.PermissionWarning(spec); w != "" {
		fmt.Fprintf(c.stderr, "idemgate %s: %s\n", f.Name(), escape(w, false))
	}
	return st, nil
}

// printJSON prints v as indented JSON that carries no control character raw.
func (c *cli) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(append(jsonSafe(b), '\n'))
	return err
}

func (c *cli) table() *tabwriter.Writer {
	return tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
}

// actor is who runs the command: --actor, else the OS user.
func (c *cli) actor(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := c.getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

func ts(t time.Time) string { return operate.TS(t) }

func dash(s string) string { return operate.Dash(s) }

// clip shortens s for a table cell; --json prints it whole.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
