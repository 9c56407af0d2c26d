package main

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"
)

// proxy is a loopback TCP proxy between the workers and PostgreSQL: the nemesis
// cuts every connection through it (Drop) or delays each chunk of bytes for a while
// (Delay).
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]bool
	until time.Time
	delay time.Duration
}

// startProxy listens on loopback and forwards to target (host:port).
func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("idemgate/integration/soak: the store proxy: %w", err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	return p, nil
}

// proxyDSN starts a proxy to the server of a postgres:// DSN and returns the DSN
// that reaches it through the proxy.
func proxyDSN(dsn string) (*proxy, string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return nil, "", fmt.Errorf("idemgate/integration/soak: the store proxy needs a postgres:// DSN with a host")
	}
	p, err := startProxy(u.Host)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) Close() {
	_ = p.ln.Close()
	p.Drop()
}

// Drop closes every connection through the proxy.
func (p *proxy) Drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
	return n / 2
}

// Delay delays every chunk of bytes by d for the next span.
func (p *proxy) Delay(d, span time.Duration) {
	p.mu.Lock()
	p.delay, p.until = d, time.Now().Add(span)
	p.mu.Unlock()
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	s, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				d := p.delay
				if time.Now().After(p.until) {
					d = 0
				}
				p.mu.Unlock()
				if d > 0 {
					time.Sleep(d)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	_ = c.Close()
	_ = s.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}
