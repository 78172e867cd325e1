// Package faultproxy is an HTTP-level fault-injecting proxy for tests of clients of an HTTP JSON
// service such as DynamoDB (and DynamoDB's stand-ins: dynalite, DynamoDB Local). It forwards
// every request to the target server and, for the requests a Rule selects, makes the outcome
// unknown to the client while the server still applies the request — the failure that
// conditional writes must survive (a retry of an applied write fails its own condition):
//
//   - ApplyThen500: the request is forwarded and applied; the client gets 500 with DynamoDB's
//     InternalServerError body instead of the server's answer.
//   - ApplyThenDrop: the request is forwarded and applied; the client's connection is closed
//     without an answer (the client sees EOF or a reset after having sent the request).
//   - DelayThenApply: the request waits Rule.Delay (longer than the client's attempt timeout)
//     before it is forwarded; the client has given up by then. Requests arriving meanwhile
//     wait behind it, so a client's retry reaches the server after the original was applied,
//     as when a slow original wins the race.
//
// Every other request is forwarded unchanged. The proxy listens on a free 127.0.0.1 port.
package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Kind is what the proxy does to a selected request.
type Kind int

// Fault kinds (see the package documentation).
const (
	Pass Kind = iota
	ApplyThen500
	ApplyThenDrop
	DelayThenApply
)

func (k Kind) String() string {
	switch k {
	case Pass:
		return "pass"
	case ApplyThen500:
		return "apply-then-500"
	case ApplyThenDrop:
		return "apply-then-drop"
	case DelayThenApply:
		return "delay-then-apply"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Kinds are the fault kinds, for table tests.
var Kinds = []Kind{ApplyThen500, ApplyThenDrop, DelayThenApply}

// Request is what a Rule sees of a request.
type Request struct {
	// Op is the DynamoDB operation named by the X-Amz-Target header ("UpdateItem" for
	// "DynamoDB_20120810.UpdateItem"), "" without one.
	Op string
	// Table is the body's "TableName" ("" when absent or not JSON).
	Table string
	// Body is the request body.
	Body []byte
}

// IsWrite reports whether r is a DynamoDB single-item write (PutItem, UpdateItem, DeleteItem).
func (r Request) IsWrite() bool {
	switch r.Op {
	case "PutItem", "UpdateItem", "DeleteItem":
		return true
	}
	return false
}

// Rule selects the requests to fault and says how.
type Rule struct {
	Kind Kind
	// Match selects candidate requests (nil: Request.IsWrite).
	Match func(Request) bool
	// Every faults the Every-th, 2·Every-th, ... candidate (counting from 1 since SetRule);
	// values <= 1 fault every candidate.
	Every int
	// Limit bounds the number of faults since SetRule (0: no bound).
	Limit int
	// Delay is how long DelayThenApply holds a request (default 1s).
	Delay time.Duration
}

// Fault is one request the proxy faulted.
type Fault struct {
	Kind    Kind
	Request Request
	// Status is the server's status code for the request (0 when the server did not answer),
	// and Response its body: what the client never saw.
	Status   int
	Response []byte
}

// Stats are cumulative counters since Start.
type Stats struct {
	Requests int64 // requests received
	Faults   int64 // requests faulted
}

// Proxy is a running proxy. Its methods are safe for concurrent use.
type Proxy struct {
	srv    *http.Server
	ln     net.Listener
	target *url.URL
	client *http.Client

	gate sync.RWMutex // DelayThenApply holds it for writing while it delays

	mu         sync.Mutex
	rule       Rule
	candidates int // since SetRule
	ruleFaults int // since SetRule
	faults     []Fault
	stats      Stats
	hook       func(Fault)
	observe    func(Request)
}

// Start listens on a free loopback port and forwards every request to target, a base URL
// ("http://127.0.0.1:8000") or host:port. Errors: a bad target, the listener cannot be opened.
func Start(target string) (*Proxy, error) {
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: bad target %q: want http://host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: u, client: &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL ("http://127.0.0.1:PORT"), the endpoint to give a client.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetRule replaces the rule (Rule{} passes everything) and restarts its candidate count.
func (p *Proxy) SetRule(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule, p.candidates, p.ruleFaults = r, 0, 0
}

// OnFault calls fn (nil: none) after each faulted request was applied, from the request's
// goroutine.
func (p *Proxy) OnFault(fn func(Fault)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = fn
}

// OnRequest calls fn (nil: none) with every request, before it is forwarded, from the request's
// goroutine (concurrently: fn must be safe for concurrent use). Tests count requests with it.
func (p *Proxy) OnRequest(fn func(Request)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observe = fn
}

// Faults returns the requests faulted so far, in order.
func (p *Proxy) Faults() []Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Fault(nil), p.faults...)
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops listening and closes open connections.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.client.CloseIdleConnections()
	return err
}

// pick counts r and returns the fault to apply to it (Pass for none) and its index in faults.
func (p *Proxy) pick(r Request) (Rule, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	rule := p.rule
	if rule.Kind == Pass {
		return Rule{}, -1
	}
	match := rule.Match
	if match == nil {
		match = Request.IsWrite
	}
	if !match(r) {
		return Rule{}, -1
	}
	p.candidates++
	every := max(rule.Every, 1)
	if p.candidates%every != 0 || (rule.Limit > 0 && p.ruleFaults >= rule.Limit) {
		return Rule{}, -1
	}
	// Counted now, so that Limit holds under concurrency; completed by record.
	p.faults = append(p.faults, Fault{Kind: rule.Kind, Request: r})
	p.stats.Faults++
	p.ruleFaults++
	return rule, len(p.faults) - 1
}

func (p *Proxy) record(i, status int, resp []byte) {
	p.mu.Lock()
	p.faults[i].Status, p.faults[i].Response = status, resp
	f, hook := p.faults[i], p.hook
	p.mu.Unlock()
	if hook != nil {
		hook(f)
	}
}

func (p *Proxy) serve(w http.ResponseWriter, in *http.Request) {
	body, err := io.ReadAll(in.Body)
	if err != nil {
		http.Error(w, "faultproxy: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	r := Request{Op: in.Header.Get("X-Amz-Target"), Body: body}
	if i := strings.LastIndexByte(r.Op, '.'); i >= 0 {
		r.Op = r.Op[i+1:]
	}
	var named struct{ TableName string }
	if json.Unmarshal(body, &named) == nil {
		r.Table = named.TableName
	}
	p.mu.Lock()
	observe := p.observe
	p.mu.Unlock()
	if observe != nil {
		observe(r)
	}
	rule, idx := p.pick(r)
	if rule.Kind == DelayThenApply {
		p.gate.Lock()
		d := rule.Delay
		if d <= 0 {
			d = time.Second
		}
		time.Sleep(d)
	} else {
		// Wait behind a delayed request, then go on without holding the gate.
		p.gate.RLock()
		p.gate.RUnlock() //nolint:staticcheck // an empty critical section: a barrier
	}
	status, header, resp, ferr := p.forward(in, body)
	if rule.Kind != Pass {
		p.record(idx, status, resp)
	}
	if rule.Kind == DelayThenApply {
		p.gate.Unlock()
	}
	switch {
	case rule.Kind == ApplyThen500:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"faultproxy: the request was applied, this answer is injected"}`))
		return
	case rule.Kind == ApplyThenDrop:
		drop(w)
		return
	case ferr != nil:
		http.Error(w, "faultproxy: forwarding: "+ferr.Error(), http.StatusBadGateway)
		return
	}
	for k, vs := range header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(resp) // after DelayThenApply the client is usually gone
}

// forward sends the request to the target and reads the whole answer.
func (p *Proxy) forward(in *http.Request, body []byte) (int, http.Header, []byte, error) {
	u := *p.target
	u.Path, u.RawQuery = in.URL.Path, in.URL.RawQuery
	// Not in's context: a client that gave up must not cancel a request the test wants applied.
	out, err := http.NewRequest(in.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, vs := range in.Header {
		if k == "Connection" || k == "Keep-Alive" || k == "Te" || k == "Trailer" || k == "Transfer-Encoding" || k == "Upgrade" {
			continue
		}
		out.Header[k] = vs
	}
	out.Host = in.Host
	res, err := p.client.Do(out)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	resp, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	h := res.Header.Clone()
	h.Del("Content-Length")
	return res.StatusCode, h, resp, nil
}

// drop closes the client's connection without an answer.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // HTTP/2: the server resets the stream
	}
	c, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST: "connection reset by peer", as a crashed front end would
	}
	_ = c.Close()
}
