package guest

// keyIndex maps (collection, key) to a batch's entries: open addressing with linear probing over
// a power-of-two table of entries indexes + 1 (0: empty), kept at most half full. Each entry
// keeps its hash and its slot, so growing rehashes no key and clearing touches only used slots.
// It is the batch's only per-key lookup (Read, Put, Delete and State.Get all go through it):
// Go's map costs several runtime calls per lookup, which WebAssembly makes expensive.
type keyIndex struct {
	slots []int32
	used  int
}

// minIndexSlots is the table size of a batch's first key.
const minIndexSlots = 64

// hashKey is FNV-1a over the collection index and the key, with murmur3's finalizer so that the
// low bits, which pick the slot, depend on every byte. It is not seeded: a WebAssembly guest has
// no secret randomness to seed it with (under the host, WASI's random source is deterministic),
// and neither has Go's map there.
func hashKey(ci int32, key []byte) uint32 {
	h := (2166136261 ^ uint32(ci)) * 16777619
	for _, c := range key {
		h = (h ^ uint32(c)) * 16777619
	}
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// insert adds entries[i], which must not be in the index, growing the table when it would be
// more than half full.
func (x *keyIndex) insert(entries []entry, i int32) {
	if 2*(x.used+1) > len(x.slots) {
		x.grow(entries[:i])
	}
	x.put(entries, i)
	x.used++
}

func (x *keyIndex) put(entries []entry, i int32) {
	mask := uint32(len(x.slots) - 1)
	p := entries[i].hash & mask
	for x.slots[p] != 0 {
		p = (p + 1) & mask
	}
	x.slots[p] = i + 1
	entries[i].pos = int32(p)
}

// grow doubles the table (minIndexSlots at first) and puts entries, every entry indexed so
// far, back in.
func (x *keyIndex) grow(entries []entry) {
	x.slots = make([]int32, max(minIndexSlots, 2*len(x.slots)))
	for i := range entries {
		x.put(entries, int32(i))
	}
}

// reset empties the index, whose entries are entries.
func (x *keyIndex) reset(entries []entry) {
	if 4*len(entries) < len(x.slots) {
		for i := range entries {
			x.slots[entries[i].pos] = 0
		}
	} else {
		clear(x.slots)
	}
	x.used = 0
}
