// Package tcpproxy is a fault-injecting TCP proxy for tests: it forwards connections from a
// loopback port to a target address and can, on command, black-hole or refuse them.
//
// Modes:
//
//   - Pass: bytes flow both ways.
//   - Hold: a black hole that heals. Nothing is forwarded in either direction; connections stay
//     open and bytes already read wait in the proxy, as packets do while TCP retransmits across
//     a partitioned path. Switching back to Pass delivers them, late. A client sees its calls
//     hang.
//   - Refuse: every open connection is reset (RST) at once and every new one is reset right
//     after it is accepted. A client sees "connection reset by peer".
//
// HoldWhen arms a trigger that switches to Hold just before forwarding the first client chunk
// it matches, so a test can freeze a client inside a chosen request.
package tcpproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Mode is what the proxy does with traffic.
type Mode int

const (
	Pass   Mode = iota // forward
	Hold               // forward nothing; keep connections and bytes until Pass
	Refuse             // reset open and new connections
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Hold:
		return "hold"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Proxy is a running proxy. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond // signalled on every mode change
	mode    Mode
	trigger func([]byte) bool
	conns   map[net.Conn]struct{}
	stats   Stats
	closed  bool
	wg      sync.WaitGroup
	trigged chan struct{}
}

// Stats are cumulative counters.
type Stats struct {
	Accepted int64 // connections accepted
	Reset    int64 // connections reset by Refuse
	Up, Down int64 // bytes forwarded client->target and target->client
}

// Start listens on a free loopback port and forwards every connection to target (host:port),
// dialled once per accepted connection. Errors: the listener cannot be opened.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, trigged: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's listening address (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetMode switches the mode (see the package documentation). Switching to Refuse resets every
// open connection before it returns.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	p.mode = m
	var reset []net.Conn
	if m == Refuse {
		for c := range p.conns {
			reset = append(reset, c)
		}
		p.stats.Reset += int64(len(reset))
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, c := range reset {
		abort(c)
	}
}

// HoldWhen arms a one-shot trigger: the first chunk read from a client for which match returns
// true switches the proxy to Hold before that chunk is forwarded. The returned channel is closed
// when it fires. A chunk is whatever one read returned (for HTTP/1.1 on loopback, usually a
// whole request). A later HoldWhen replaces an unfired trigger.
func (p *Proxy) HoldWhen(match func(chunk []byte) bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trigger = match
	p.trigged = make(chan struct{})
	return p.trigged
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		p.stats.Accepted++
		if p.closed || p.mode == Refuse {
			p.stats.Reset++
			p.mu.Unlock()
			abort(c)
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.forget(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		abort(client)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		server.Close()
		return
	}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	defer p.forget(server)
	done := make(chan struct{}, 2)
	go func() { p.pump(server, client, true); done <- struct{}{} }()
	go func() { p.pump(client, server, false); done <- struct{}{} }()
	<-done
	// One direction ended: end the other (HTTP clients do not half-close).
	client.Close()
	server.Close()
	<-done
}

// pump copies src to dst chunk by chunk, waiting while the mode is Hold.
func (p *Proxy) pump(dst, src net.Conn, up bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(buf[:n], up) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			p.mu.Lock()
			if up {
				p.stats.Up += int64(n)
			} else {
				p.stats.Down += int64(n)
			}
			p.mu.Unlock()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				abort(dst)
			}
			return
		}
	}
}

// gate fires the trigger on client chunks and blocks while in Hold; false means stop (Refuse or
// closed).
func (p *Proxy) gate(chunk []byte, up bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if up && p.trigger != nil && p.trigger(chunk) {
		p.trigger = nil
		p.mode = Hold
		close(p.trigged)
		p.cond.Broadcast()
	}
	for p.mode == Hold && !p.closed {
		p.cond.Wait()
	}
	return !p.closed && p.mode != Refuse
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// abort closes c with an RST instead of a FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
