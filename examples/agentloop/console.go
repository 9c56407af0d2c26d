package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/store"
)

// serveConsole serves the operator's page (package console) on st on a free
// loopback port and prints its address on one line to out. stop ends it.
func serveConsole(st store.Store, out io.Writer) (stop func(), err error) {
	h, err := console.Handler(st, console.Options{Refresh: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("--console: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(out, "idemgate demo: console http://%s/ (the operator's page on the demo's store, live while the scenarios run; Ctrl-C stops it after them)\n", ln.Addr())
	return func() { _ = srv.Close() }, nil
}
