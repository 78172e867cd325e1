package event

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// FieldSpan is where a top-level field's value is in a JSON object: doc[Start:End] is its JSON
// text (a string's includes its quotes). Start is -1 when the object has no such field. Escaped
// is true for a string value holding a backslash escape (its text is not its value).
type FieldSpan struct {
	Start, End int
	Escaped    bool
}

// IndexFields finds the top-level fields names of doc in one pass, for the batch field index
// (ABI.md §2.1): when doc follows the document rule (CheckDoc would return nil) it sets
// spans[i] to the value of the member whose key, unescaped, equals names[i] (Start -1 when there
// is none) and returns true. For any other doc it returns false and spans is unspecified: the
// guest then scans doc itself. spans must be at least as long as names; names should be distinct
// (a repeated name gets the same span). It does not allocate while doc follows the rule and its
// objects have at most 16 keys each (a duplicate key, or a broken rule, allocates its error).
// Safe for concurrent use.
func IndexFields(doc []byte, names []string, spans []FieldSpan) bool {
	if len(doc) > MaxDocBytes {
		return false
	}
	spans = spans[:len(names)]
	for i := range spans {
		spans[i] = FieldSpan{Start: -1, End: -1}
	}
	if indexFlat(doc, names, spans) {
		return true
	}
	for i := range spans {
		spans[i] = FieldSpan{Start: -1, End: -1}
	}
	s := docScanner{doc: doc, names: names, spans: spans}
	return s.document() == scanOK
}

// maxFlatKeys is how many keys an object may have for indexFlat.
const maxFlatKeys = 16

// indexFlat is IndexFields for the common shape of events, in one tight pass: an object without
// white space whose keys are plain ASCII (strPlain) of 1 to 255 bytes (under MaxFieldNameBytes)
// and whose values are such strings, integers of at most MaxNumberDigits digits, true, false or
// null, with at most maxFlatKeys keys. Such a document follows the rule exactly when its keys
// are distinct. It returns true when doc has
// that shape (the spans are set) and false for anything else, valid or not, which the full
// scanner then decides: false says nothing about doc.
func indexFlat(doc []byte, names []string, spans []FieldSpan) bool {
	n := len(doc)
	if n < 2 || doc[0] != '{' {
		return false
	}
	if doc[1] == '}' {
		return n == 2
	}
	// The keys so far, for the duplicate check: start and length (keys of up to 255 bytes).
	var ks [maxFlatKeys]int32
	var kl [maxFlatKeys]uint8
	nk := 0
	i := 1
	for {
		if i >= n || doc[i] != '"' {
			return false
		}
		// The first eight bytes inline: most keys and strings fit, and a function doing this
		// (over the inliner's budget) costs a call per key and value. The string value below
		// repeats it for the same reason.
		j := i + 1
		if j+8 <= n {
			if m := notPlain(binary.LittleEndian.Uint64(doc[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
			} else {
				j = plainEnd(doc, j+8)
			}
		} else {
			j = plainEnd(doc, j)
		}
		if j >= n || doc[j] != '"' || j == i+1 || j-i-1 > 255 || nk == maxFlatKeys {
			return false
		}
		key := doc[i+1 : j]
		for x := range nk {
			if int(kl[x]) == len(key) && string(doc[ks[x]:int(ks[x])+len(key)]) == string(key) {
				return false
			}
		}
		ks[nk], kl[nk] = int32(i+1), uint8(len(key))
		nk++
		i = j + 1
		if i+1 >= n || doc[i] != ':' {
			return false
		}
		i++
		vs := i
		switch c := doc[i]; {
		case c == '"':
			j = i + 1
			if j+8 <= n {
				if m := notPlain(binary.LittleEndian.Uint64(doc[j:])); m != 0 {
					j += bits.TrailingZeros64(m) >> 3
				} else {
					j = plainEnd(doc, j+8)
				}
			} else {
				j = plainEnd(doc, j)
			}
			if j >= n || doc[j] != '"' {
				return false
			}
			i = j + 1
		case c == '-' || c-'0' <= 9:
			j = i
			if c == '-' {
				j++
			}
			d := j
			if j < n && doc[j] == '0' {
				j++
			} else {
				for j < n && doc[j]-'0' <= 9 {
					j++
				}
			}
			if j == d || j-d > MaxNumberDigits {
				return false
			}
			i = j
		case c == 't' && bytes.HasPrefix(doc[i:], []byte("true")):
			i += 4
		case c == 'f' && bytes.HasPrefix(doc[i:], []byte("false")):
			i += 5
		case c == 'n' && bytes.HasPrefix(doc[i:], []byte("null")):
			i += 4
		default:
			return false
		}
		for x, name := range names {
			if len(name) == len(key) && name == string(key) {
				spans[x] = FieldSpan{Start: vs, End: i}
			}
		}
		if i >= n {
			return false
		}
		switch doc[i] {
		case ',':
			i++
		case '}':
			return i+1 == n
		default:
			return false
		}
	}
}

// indexMember records a top-level member's value doc[start:end] under key k when k is one of
// s.names.
func (s *docScanner) indexMember(k []byte, start, end int) {
	for i, n := range s.names {
		if len(n) == len(k) && string(k) == n {
			sp := &s.spans[i]
			sp.Start, sp.End = start, end
			sp.Escaped = s.doc[start] == '"' && bytes.IndexByte(s.doc[start+1:end-1], '\\') >= 0
		}
	}
}

// plainEnd returns the index of the first byte of doc from i on that is not strPlain (or
// len(doc)), eight bytes at a time.
func plainEnd(doc []byte, i int) int {
	for ; i+8 <= len(doc); i += 8 {
		if m := notPlain(binary.LittleEndian.Uint64(doc[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(doc) && strPlain[doc[i]] {
		i++
	}
	return i
}

// notPlain flags the bytes of x (eight bytes of a string, little-endian) that are not strPlain:
// the lowest set bit is the high bit of the first '"', '\\', byte below 0x20 or byte from 0x80;
// 0 when all eight are plain. Borrows make the bits above the lowest unreliable: use only the
// lowest.
func notPlain(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (x - ones*0x20) | x) & highs
}
