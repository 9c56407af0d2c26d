package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/internal/storeopen"
)

// consoleTokenEnv is the environment variable that may carry the console's token.
const consoleTokenEnv = "IDEMGATE_CONSOLE_TOKEN"

func (c *cli) console(args []string) error {
	if err := secrets.RefuseFlag(args, "token", consoleTokenEnv, "token-file"); err != nil {
		return usagef("%v", err)
	}
	f := c.newFlags("console", "[--listen 127.0.0.1:PORT] [--token-file FILE] [--read-only] [--temporal-ui URL] [flags]",
		"Serves the operator's page (package console) on the store: the writes waiting on a person first, with\n"+
			"the withheld call and what the witnesses said; a key's story; a workflow's writes; the census; the\n"+
			"pauses. It settles keys and pauses writes exactly as `idemgate resolve` and `idemgate pause` do, with the\n"+
			"console user as the actor (\"console\"). It reads the store on every request: live while workers run.\n"+
			"It listens on loopback unless given a token: --token-file FILE, or $"+consoleTokenEnv+" (never a flag\n"+
			"value). Stop it with Ctrl-C.", true)
	listen := f.String("listen", "127.0.0.1:7380", "address to listen on (host:port; port 0 picks one)")
	tokenFile := f.String("token-file", "", "a file holding the token every request must carry (needed to listen beyond loopback; default $"+consoleTokenEnv+")")
	readOnly := f.Bool("read-only", false, "show, never act: the settle and pause forms are hidden and refused")
	tui := f.String("temporal-ui", "", "the Temporal UI's root URL (e.g. http://localhost:8233): workflows link to their run there")
	ns := f.String("namespace", "default", "the workers' Temporal namespace, for the Temporal UI links")
	window := f.Duration("window", 0, "how long a result settled as sent is remembered (the worker's Options.Window; default its default)")
	if err := f.parseNone(args); err != nil {
		return err
	}
	var token []byte
	if *tokenFile != "" {
		s, err := secrets.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %v", err)
		}
		token = []byte(s)
	} else if s := strings.TrimSpace(c.getenv(consoleTokenEnv)); s != "" {
		token = []byte(s) // trimmed as a token file is: `export VAR="$(cat file)"` may keep a newline
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usagef("--listen %q: give host:port, e.g. 127.0.0.1:7380", *listen)
	}
	if ip := net.ParseIP(host); len(token) == 0 && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return usagef("--listen %s is not a loopback address: the console serves anyone who can reach it. Give it a token "+
			"(--token-file FILE or $%s), or listen on 127.0.0.1 and reach it through an SSH tunnel or your own "+
			"authenticating proxy", *listen, consoleTokenEnv)
	}
	logger := slog.New(slog.NewTextHandler(escapeWriter{c.stderr}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	st, err := c.open(ctx, f)
	cancel()
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := console.Handler(st, console.Options{TemporalUIBase: *tui, Namespace: *ns, ReadOnly: *readOnly, Token: token,
		Window: *window, Now: c.now, Logger: logger})
	if err != nil {
		return usagef("%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %v. Nothing is served; pick a free port with --listen", *listen, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	mode := ""
	if *readOnly {
		mode = " (read-only)"
	}
	c.printf("idemgate console: serving %s on http://%s/%s; Ctrl-C stops it\n", storeopen.Redact(f.store), ln.Addr(), mode)
	stop := c.stop
	if stop == nil {
		sctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
		defer cancel()
		stop = sctx.Done()
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-stop:
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
