package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// writeOps are the DynamoDB operations that write items: what "DynamoDB writes" counts.
var writeOps = map[string]bool{
	"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
}

// CountingProxy is an HTTP reverse proxy in front of a DynamoDB endpoint that counts requests
// by operation (the X-Amz-Target header, "DynamoDB_20120810.PutItem" -> "PutItem") and the
// write requests by table (the request's TableName, the tables of a BatchWriteItem or
// TransactWriteItems). It listens on 127.0.0.1 only. Safe for concurrent use.
type CountingProxy struct {
	URL string // the proxy's endpoint, http://127.0.0.1:PORT

	ln     net.Listener
	srv    *http.Server
	mu     sync.Mutex
	ops    map[string]int64
	tables map[string]int64 // write requests per table (a request on two tables counts for both)
}

// StartProxy starts a CountingProxy forwarding to target (an http:// URL).
func StartProxy(target string) (*CountingProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CountingProxy{URL: "http://" + ln.Addr().String(), ln: ln, ops: map[string]int64{}, tables: map[string]int64{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			var err error
			if body, err = io.ReadAll(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		p.count(r.Header.Get("X-Amz-Target"), body)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// count adds one request of the operation named by target with body.
func (p *CountingProxy) count(target string, body []byte) {
	op := target
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		op = target[i+1:]
	}
	if op == "" {
		op = "(none)"
	}
	var tables []string
	if writeOps[op] {
		tables = WriteTables(body)
	}
	p.mu.Lock()
	p.ops[op]++
	for _, t := range tables {
		p.tables[t]++
	}
	p.mu.Unlock()
}

// WriteTables returns the tables a DynamoDB write request's JSON body writes: its TableName,
// the keys of RequestItems (BatchWriteItem) or the TableName of each TransactItems entry
// (TransactWriteItems), sorted and without repeats; none for a body that is not such JSON.
func WriteTables(body []byte) []string {
	var req struct {
		TableName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	set := map[string]bool{}
	if req.TableName != "" {
		set[req.TableName] = true
	}
	for t := range req.RequestItems {
		set[t] = true
	}
	for _, it := range req.TransactItems {
		for _, x := range it {
			if x.TableName != "" {
				set[x.TableName] = true
			}
		}
	}
	return sortedKeys(set)
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// TableWrites returns a copy of the write requests counted per table.
func (p *CountingProxy) TableWrites() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.tables)
}

// Ops returns a copy of the requests counted per operation.
func (p *CountingProxy) Ops() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.ops)
}

// Writes returns the write requests counted (writeOps).
func (p *CountingProxy) Writes() int64 { return Writes(p.Ops()) }

// Writes sums the write operations (writeOps) of ops.
func Writes(ops map[string]int64) int64 {
	var n int64
	for op, c := range ops {
		if writeOps[op] {
			n += c
		}
	}
	return n
}

// OpsString formats ops as "GetItem=3 PutItem=7", sorted by name.
func OpsString(ops map[string]int64) string {
	var b strings.Builder
	for i, k := range sortedKeys(ops) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(ops[k], 10))
	}
	return b.String()
}

// Close stops the proxy.
func (p *CountingProxy) Close() error { return p.srv.Close() }
