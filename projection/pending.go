package projection

import (
	"bytes"
	"context"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/wasmabi"
)

// pending holds the mutations of handled batches not yet committed, in first-write order, last
// write per key winning. It is the overlay the handler's reads see (wasmabi/ABI.md §5).
type pending struct {
	docs  map[docKey]int // index into muts
	muts  []event.Mutation
	seq   string // last handled sequence number (pending or committed)
	count int    // events since the last commit
	bytes int    // document bytes added since the last commit (replaced ones included)
	// events handled since the last commit (dead-lettered ones excepted), kept to be handled
	// again when the store refuses the commit (Shard.refuse). Their Data is the caller's.
	events []event.Event

	// known caches documents of this shard as committed (nil: absent), filled only in
	// Transactional mode, where a commit applies all of its mutations or none. Documents are
	// written by one shard only (they are keyed by the partition key; README), so while this
	// owner holds the shard no one else changes them and reads need not go back to the store.
	// It lives as long as one Open and holds at most maxKnownDocs.
	known map[docKey][]byte
}

// maxKnownDocs bounds pending.known per shard (documents; the map is cleared when full).
const maxKnownDocs = 20000

type docKey struct{ coll, key string }

// remember records doc as the committed state of k.
func (p *pending) remember(k docKey, doc []byte) {
	if p.known == nil {
		p.known = make(map[docKey][]byte)
	}
	if len(p.known) >= maxKnownDocs {
		clear(p.known)
	}
	p.known[k] = bytes.Clone(doc)
}

// rememberAll records ms as committed.
func (p *pending) rememberAll(ms []event.Mutation) {
	for _, m := range ms {
		p.remember(docKey{m.Collection, m.Key}, m.Doc)
	}
}

func (p *pending) add(ms []event.Mutation) {
	if p.docs == nil {
		p.docs = map[docKey]int{}
	}
	for _, m := range ms {
		p.bytes += len(m.Doc)
		k := docKey{m.Collection, m.Key}
		if i, ok := p.docs[k]; ok {
			p.muts[i] = m
			continue
		}
		p.docs[k] = len(p.muts)
		p.muts = append(p.muts, m)
	}
}

func (p *pending) empty() bool { return p.count == 0 && len(p.muts) == 0 }

func (p *pending) reset() {
	clear(p.docs)
	p.muts = p.muts[:0]
	p.count, p.bytes = 0, 0
	clear(p.events) // do not keep the events' data alive
	p.events = p.events[:0]
}

// full reports whether the pending mutations reach the limits of one handler output
// (wasmabi.MaxOutputMutations, MaxOutputBytes): a flush is due.
func (p *pending) full() bool {
	return len(p.muts) >= wasmabi.MaxOutputMutations || p.bytes >= wasmabi.MaxOutputBytes
}

// overflows reports whether adding ms to a non-empty pending set could take it past the
// limits of one handler output (counting every mutation of ms as a new key).
func (p *pending) overflows(ms []event.Mutation) bool {
	if len(p.muts) == 0 {
		return false
	}
	b := p.bytes
	for _, m := range ms {
		b += len(m.Doc)
	}
	return len(p.muts)+len(ms) > wasmabi.MaxOutputMutations || b > wasmabi.MaxOutputBytes
}

// coalesce returns ms with the last write per key, in first-write order.
func coalesce(ms []event.Mutation) []event.Mutation {
	var p pending
	p.add(ms)
	return p.muts
}

// overlay serves the handler's reads: pending mutations, then known documents, then the store.
type overlay struct {
	p     *pending
	store readmodel.Store
	proj  string
	cache bool // remember read documents in p.known (Transactional mode)
}

// ReadDocFromMemory implements host.MemoryDocReader: the pending mutations, then the known
// documents. It does not allocate (the map index expressions with string(key) do not copy key).
func (o overlay) ReadDocFromMemory(collection string, key []byte) ([]byte, bool, bool) {
	if i, ok := o.p.docs[docKey{collection, string(key)}]; ok {
		d := o.p.muts[i].Doc
		return d, d != nil, true
	}
	if d, ok := o.p.known[docKey{collection, string(key)}]; ok {
		return d, d != nil, true
	}
	return nil, false, false
}

// ReadDoc implements host.DocReader: ReadDocFromMemory, else the store (with a copy of key).
func (o overlay) ReadDoc(ctx context.Context, collection string, key []byte) ([]byte, bool, error) {
	if d, found, ok := o.ReadDocFromMemory(collection, key); ok {
		return d, found, nil
	}
	k := docKey{collection, string(key)}
	doc, found, err := o.store.Get(ctx, o.proj, collection, k.key)
	if err == nil && o.cache {
		if !found {
			doc = nil
		}
		o.p.remember(k, doc)
	}
	return doc, found, err
}
