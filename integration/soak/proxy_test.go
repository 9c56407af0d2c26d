package main

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// The store proxy forwards bytes both ways, and Drop cuts every connection through it.
func TestProxyForwardsAndDrops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p, dsn, err := proxyDSN("postgres://u@" + ln.Addr().String() + "/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if want := "postgres://u@" + p.Addr() + "/db?sslmode=disable"; dsn != want {
		t.Fatalf("DSN %q, want %q", dsn, want)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(c).ReadString('\n'); err != nil || l != "ping\n" {
		t.Fatalf("echo through the proxy: %q %v", l, err)
	}
	if n := p.Drop(); n != 1 {
		t.Fatalf("Drop cut %d connections, want 1", n)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection still reads after Drop")
	}
}
