package guest

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// Zero-allocation accessors for the top-level fields of a JSON object (RFC 8259), for event data
// and stored documents. They scan data from the start on every call, skip (and syntax-check) the
// values before the field they look for, and stop at it: bytes after the field are not checked,
// so {"a":1, is enough to read "a". Keys match exactly after unescaping, as encoding/json does for
// map keys. When a key occurs more than once, the first occurrence wins (RFC 8259 §4 leaves
// duplicates undefined; encoding/json takes the last). None of them panic on any input; on
// anything that is not an object, a missing field or a value of another type they return false.
//
// They agree with encoding/json on valid input (checked by FuzzJSON): nesting is limited to
// 10000 levels like encoding/json, strings are unescaped with U+FFFD for invalid UTF-8 and lone
// surrogates.

// maxJSONDepth is the deepest nesting accepted, the limit encoding/json applies.
const maxJSONDepth = 10000

// JSONRaw returns the raw JSON text of the top-level field key of the object data, e.g.
// `{"x":1}` for key "x" of {"a":{"x":1}}. The slice aliases data.
func JSONRaw(data []byte, key string) ([]byte, bool) {
	v, _, ok := jsonField(data, key)
	return v, ok
}

// JSONInt returns the top-level field key of the object data when it is an integer literal
// (no fraction or exponent) that fits in an int64.
func JSONInt(data []byte, key string) (int64, bool) {
	v, _, ok := jsonField(data, key)
	if !ok {
		return 0, false
	}
	return parseJSONInt(v)
}

// JSONFloat returns the top-level field key of the object data when it is a number.
func JSONFloat(data []byte, key string) (float64, bool) {
	v, _, ok := jsonField(data, key)
	if !ok || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(bytesString(v), 64) // strconv copies what its error keeps
	return f, err == nil
}

// JSONBool returns the top-level field key of the object data when it is true or false.
func JSONBool(data []byte, key string) (value, ok bool) {
	v, _, ok := jsonField(data, key)
	if !ok {
		return false, false
	}
	switch v[0] {
	case 't':
		return true, true
	case 'f':
		return false, true
	}
	return false, false
}

// JSONString returns the unescaped value of the top-level string field key of the object data.
// The result aliases data (no allocation) unless the string contains escapes or invalid UTF-8,
// in which case it is a new slice.
func JSONString(data []byte, key string) ([]byte, bool) {
	v, plain, ok := jsonField(data, key)
	if !ok || v[0] != '"' {
		return nil, false
	}
	raw := v[1 : len(v)-1]
	if plain {
		return raw, true
	}
	return unescapeJSON(make([]byte, 0, len(raw)), raw), true
}

// jsonField finds the top-level field key of the object data and returns its raw value. plain
// reports, for a string value, that its raw content is already its unescaped, valid UTF-8 value.
func jsonField(data []byte, key string) (val []byte, plain, ok bool) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false, false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil, false, false
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, false, false
		}
		j, kplain := scanString(data, i)
		if j < 0 {
			return nil, false, false
		}
		match := keyEqual(data[i+1:j-1], kplain, key)
		i = skipWS(data, j)
		if i >= len(data) || data[i] != ':' {
			return nil, false, false
		}
		i = skipWS(data, i+1)
		start := i
		plain = false
		if i < len(data) && data[i] == '"' {
			var vplain bool
			if j, vplain = scanString(data, i); j < 0 {
				return nil, false, false
			}
			plain = vplain
		} else if j = skipValue(data, i, 1); j < 0 { // the object itself is level 1
			return nil, false, false
		}
		i = skipWS(data, j)
		if i >= len(data) || (data[i] != ',' && data[i] != '}') {
			return nil, false, false
		}
		if match {
			return data[start:j], plain, true
		}
		if data[i] == '}' { // the object ends without the key
			return nil, false, false
		}
		i = skipWS(data, i+1)
	}
}

func keyEqual(raw []byte, plain bool, key string) bool {
	if plain {
		return bytesString(raw) == key
	}
	var tmp [128]byte
	return bytesString(unescapeJSON(tmp[:0], raw)) == key
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainByte marks the bytes that stand for themselves inside a JSON string: printable ASCII
// except '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString checks the string starting at data[i] == '"' and returns the index after its closing
// quote (-1 when malformed) and whether its content has neither escapes nor invalid UTF-8.
func scanString(data []byte, i int) (end int, plain bool) {
	i++
	start := i
	plain = true
	high := false
	for i < len(data) {
		for i < len(data) && plainByte[data[i]] {
			i++
		}
		if i >= len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			if high && plain && !utf8.Valid(data[start:i]) {
				plain = false
			}
			return i + 1, plain
		case c == '\\':
			plain = false
			if i+1 >= len(data) {
				return -1, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return -1, false
				}
				for _, h := range data[i+2 : i+6] {
					if hexVal(h) < 0 {
						return -1, false
					}
				}
				i += 6
			default:
				return -1, false
			}
		case c < 0x20:
			return -1, false
		default:
			if c >= 0x80 {
				high = true
			}
			i++
		}
	}
	return -1, false
}

// skipValue checks the value starting at data[i] and returns the index after it, or -1.
func skipValue(data []byte, i, depth int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; {
	case c == '"':
		j, _ := scanString(data, i)
		return j
	case c == '{':
		if depth >= maxJSONDepth {
			return -1
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return -1
			}
			if i, _ = scanString(data, i); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) || data[i] != ':' {
				return -1
			}
			if i = skipValue(data, skipWS(data, i+1), depth+1); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return -1
			}
			if data[i] == '}' {
				return i + 1
			}
			if data[i] != ',' {
				return -1
			}
			i = skipWS(data, i+1)
		}
	case c == '[':
		if depth >= maxJSONDepth {
			return -1
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1
		}
		for {
			if i = skipValue(data, i, depth+1); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return -1
			}
			if data[i] == ']' {
				return i + 1
			}
			if data[i] != ',' {
				return -1
			}
			i = skipWS(data, i+1)
		}
	case c == 't':
		return skipLiteral(data, i, "true")
	case c == 'f':
		return skipLiteral(data, i, "false")
	case c == 'n':
		return skipLiteral(data, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return skipNumber(data, i)
	}
	return -1
}

func skipLiteral(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || bytesString(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at data[i].
func skipNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// parseJSONInt parses a raw JSON value that must be an integer literal fitting in an int64; an
// empty v is not one.
func parseJSONInt(v []byte) (int64, bool) {
	d := v
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		d = v[1:]
	}
	if len(d) == 0 || len(d) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range d {
		if c-'0' > 9 {
			return 0, false
		}
		u = u*10 + uint64(c-'0') // at most 19 digits: cannot overflow uint64
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func hex4(b []byte) rune {
	return rune(hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3]))
}

// unescapeJSON appends the value of the raw (already syntax-checked) string content to dst,
// replacing invalid UTF-8 and lone surrogates with U+FFFD, as encoding/json does.
func unescapeJSON(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' {
			switch raw[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := utf8.RuneError
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if d := utf16.DecodeRune(r, hex4(raw[i+2:])); d != utf8.RuneError {
							r2 = d
							i += 6
						}
					}
					r = r2
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, raw[i+1])
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		dst = utf8.AppendRune(dst, r)
		i += size
	}
	return dst
}

// Object appends one JSON object to a byte slice, without allocating beyond growing it. Fields
// appear in the order they are added; keys and string values are escaped (invalid UTF-8 becomes
// U+FFFD). Use:
//
//	o := guest.NewObject(scratch[:0])
//	o.Int("flights", n).Str("origin", "SFO")
//	doc := o.Bytes() // {"flights":12,"origin":"SFO"}
//
// The AssemblyScript library's JsonWriter writes byte-identical output for the same calls.
type Object struct {
	buf    []byte
	fields int
}

// NewObject starts an object appended to dst.
func NewObject(dst []byte) Object { return Object{buf: append(dst, '{')} }

func (o *Object) key(k string) {
	b := o.buf
	if o.fields > 0 {
		b = append(b, ',')
	}
	o.fields++
	// A key of plain bytes, the usual literal, is copied while it is checked, into room made
	// once; otherwise appendQuoted escapes it.
	if n := len(b); cap(b)-n >= len(k)+3 {
		d := b[n : n+len(k)+3]
		d[0] = '"'
		var special uint8
		for i := 0; i < len(k); i++ {
			c := k[i]
			special |= specialByte[c]
			d[i+1] = c
		}
		if special == 0 {
			d[len(k)+1], d[len(k)+2] = '"', ':'
			o.buf = b[:n+len(k)+3]
			return
		}
	}
	b = appendQuoted(b, k)
	o.buf = append(b, ':')
}

// specialByte is 1 for the bytes that are not plainByte.
var specialByte = func() (t [256]uint8) {
	for c := range t {
		if !plainByte[c] {
			t[c] = 1
		}
	}
	return t
}()

// Int adds an integer field.
func (o *Object) Int(key string, v int64) *Object {
	// The usual field, a plain key with room for it and 20 characters of number, is written in
	// place in one pass, without calls: ',"key":' then the digits, two a step from the last.
	b := o.buf
	if n := len(b); cap(b)-n >= len(key)+24 {
		d := b[n : n+len(key)+24] // at most ',"' key '":' '-' 19 digits
		p := 0
		if o.fields > 0 {
			d[0] = ','
			p = 1
		}
		d[p] = '"'
		p++
		var special uint8
		for i := 0; i < len(key); i++ {
			c := key[i]
			special |= specialByte[c]
			d[p+i] = c
		}
		if special == 0 {
			p += len(key)
			d[p], d[p+1] = '"', ':'
			p += 2
			u := uint64(v)
			if v < 0 {
				d[p] = '-'
				p++
				u = -u
			}
			for t := u; t >= 10; t /= 10 {
				p++
			}
			q := p + 1 // after the last digit
			for u >= 100 {
				r := u % 100 * 2
				d[q-1], d[q-2] = digitPairs[r+1], digitPairs[r]
				q -= 2
				u /= 100
			}
			if u >= 10 {
				d[q-1], d[q-2] = digitPairs[u*2+1], digitPairs[u*2]
			} else {
				d[q-1] = byte('0' + u)
			}
			o.buf = b[:n+p+1]
			o.fields++
			return o
		}
	}
	o.key(key)
	o.buf = appendInt(o.buf, v)
	return o
}

// digitPairs holds "00" to "99".
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// appendInt appends the decimal form of v, as strconv.AppendInt(dst, v, 10) does, two digits per
// step and with one call less.
func appendInt(dst []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		u = -u
	} else if u < 10 {
		return append(dst, byte('0'+u))
	}
	var tmp [20]byte
	i := len(tmp)
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		tmp[i], tmp[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if u >= 10 {
		i -= 2
		tmp[i], tmp[i+1] = digitPairs[u*2], digitPairs[u*2+1]
	} else {
		i--
		tmp[i] = byte('0' + u)
	}
	if v < 0 {
		i--
		tmp[i] = '-'
	}
	return append(dst, tmp[i:]...)
}

// Float adds a number field in the shortest form that round-trips; NaN and ±Inf, which JSON
// cannot represent, are written as null.
func (o *Object) Float(key string, v float64) *Object {
	o.key(key)
	if v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308 {
		o.buf = append(o.buf, "null"...)
		return o
	}
	o.buf = strconv.AppendFloat(o.buf, v, 'g', -1, 64)
	return o
}

// Bool adds a true or false field.
func (o *Object) Bool(key string, v bool) *Object {
	o.key(key)
	o.buf = strconv.AppendBool(o.buf, v)
	return o
}

// Str adds a string field.
func (o *Object) Str(key, v string) *Object {
	o.key(key)
	o.buf = appendQuoted(o.buf, v)
	return o
}

// StrBytes adds a string field from bytes.
func (o *Object) StrBytes(key string, v []byte) *Object {
	o.key(key)
	o.buf = appendQuoted(o.buf, v)
	return o
}

// Raw adds a field whose value is the JSON text raw, copied unchecked: it must be valid JSON.
func (o *Object) Raw(key string, raw []byte) *Object {
	o.key(key)
	o.buf = append(o.buf, raw...)
	return o
}

// Bytes returns dst followed by the finished object. It may be called more than once.
func (o *Object) Bytes() []byte { return append(o.buf, '}') }

const hexDigits = "0123456789abcdef"

func appendQuoted[T string | []byte](dst []byte, s T) []byte {
	// The plain prefix (usually all of s) in one copy: per-byte appends cost much more in
	// WebAssembly.
	i := 0
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	dst = append(dst, '"')
	dst = append(dst, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
				break
			}
			var tmp [utf8.UTFMax]byte
			r, size := utf8.DecodeRune(tmp[:copy(tmp[:], s[i:])])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\ufffd"...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(dst, '"')
}

// JSONFields reads several top-level fields of a JSON object in one scan, with the same rules as
// JSONRaw & co. (first occurrence wins; values before the last field needed are syntax-checked,
// bytes after it are not). A field counts as present when JSONRaw would find it: the scan stops
// at the first syntax error, and fields not seen by then are absent. Reuse one JSONFields for
// every event; Scan does not allocate (except to unescape keys with escapes longer than 128
// bytes, and once per instance to register its keys). Not safe for concurrent use.
//
//	f := guest.NewJSONFields("delay", "origin")
//	f.Scan(ev.Data)
//	delay, ok := f.Int(0)
//	origin, ok := f.String(1)
//
// Scanning the current event's data during a batch, a JSONFields uses the host's field index
// (ABI.md §2.1) when it can: at its first such Scan in an instance (a WebAssembly instance, or a
// Native) it registers its keys with the host's field import, and from the next batch on, when
// the host has indexed the event, Scan takes the fields' places from the index instead of
// scanning the data. The host indexes only data that is one valid JSON object with unique keys,
// for which the answers are the same; other data is scanned. A JSONFields whose keys the host
// does not take all (an empty key, one over 255 bytes or not valid UTF-8, more than 64 names in
// the instance) always scans.
type JSONFields struct {
	keys  []fieldKey
	slot  [64]int8    // keySlot(key) -> 1 + index in keys; 0: no key; -1: several keys (or one of index >= 127)
	data  []byte      // the data of the last Scan
	gen   uint64      // numbers the Scans; spans of earlier ones are stale
	left  int         // keys not found yet by the Scan under way
	spans []fieldSpan // per key: where its value is in data

	// The field index: per key its slot, registered with the host of regGen (Batch.regGen; 0:
	// none yet), and the largest of them, -1 when the host refused a key.
	regGen  uint64
	slots   []uint8
	maxSlot int
}

// keySlot is the slot of a key in JSONFields.slot, from its length and its first and last bytes
// (for "", both quotes around it: the bytes Scan reads for an empty key).
func keySlot(n int, first, last byte) int {
	return (n + 5*int(first) + 3*int(last)) & 63
}

// fieldKey is a key of a JSONFields with its first bytes as words, to compare eight bytes at a
// time: under WebAssembly a loop costs a jump through the function's dispatch table per
// iteration, and a comparison through the runtime costs a call.
type fieldKey struct {
	name   string
	w0, m0 uint64 // name[:min(8, len)] little-endian, and the mask of its bytes
	w1     uint64 // name[len-8:] when 8 < len <= 16
}

// fieldSpan is data[start:end] of a field's raw value when gen is the JSONFields' (else the
// field is absent). Offsets rather than slices: storing them needs no write barrier, and the
// generation spares clearing them at every Scan.
type fieldSpan struct {
	start, end int
	gen        uint64
	plain      bool // a string value without escapes or invalid UTF-8
}

// NewJSONFields returns a reader of the top-level fields keys (index i in the accessors is
// keys[i]). It panics when a key repeats.
func NewJSONFields(keys ...string) *JSONFields {
	f := &JSONFields{keys: make([]fieldKey, len(keys)), spans: make([]fieldSpan, len(keys)), gen: 1,
		slots: make([]uint8, len(keys))}
	for i, k := range keys {
		for _, k2 := range keys[:i] {
			if k == k2 {
				panic("guest: NewJSONFields: key " + strconv.Quote(k) + " repeats")
			}
		}
		fk := &f.keys[i]
		fk.name = k
		var b [8]byte
		copy(b[:], k)
		fk.w0 = binary.LittleEndian.Uint64(b[:])
		fk.m0 = ^uint64(0) >> (64 - 8*min(8, len(k)))
		if len(k) == 0 {
			fk.m0 = 0
		}
		if len(k) > 8 && len(k) <= 16 {
			fk.w1 = binary.LittleEndian.Uint64([]byte(k[len(k)-8:]))
		}
		first, last := byte('"'), byte('"')
		if len(k) > 0 {
			first, last = k[0], k[len(k)-1]
		}
		// A slot holds the index of its one key while it fits an int8; a key of a larger index
		// marks its slot shared, so that Scan searches it.
		if s := &f.slot[keySlot(len(k), first, last)]; *s == 0 && i < math.MaxInt8 {
			*s = int8(i + 1)
		} else {
			*s = -1
		}
	}
	return f
}

// Scan reads the fields of data, replacing those of the previous Scan. During a batch, when data
// is the current event's Data (the slice the Event holds, not a copy or a part of it), Scan may
// register the keys or read the host's field index (see JSONFields), which describes the data as
// the host sent it: a handler that changes the event's bytes in place must not Scan them then.
// Natively, while a Native runs a batch alone, Scan compares data with that batch's current
// event: call it from that Native's handler goroutine only, not from other goroutines at the
// same time.
//
// The common shapes (keys and string values without escapes, integers, no whitespace around
// ':' and ',') are scanned inline; anything else goes through the general scanString, skipValue
// and skipWS. Under WebAssembly every call, memory access and loop iteration counts.
func (f *JSONFields) Scan(data []byte) {
	if b := currentBatch(); b != nil && b.eventData(data) && f.fromIndex(b, data) {
		return
	}
	f.data = data
	f.gen++
	f.left = len(f.keys)
	i := 0
	if len(data) == 0 || data[0] != '{' {
		if i = skipWS(data, 0); i >= len(data) || data[i] != '{' {
			return
		}
	}
	i++
	if i < len(data) && data[i] != '"' {
		if i = skipWS(data, i); i < len(data) && data[i] == '}' {
			return
		}
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return
		}
		// The key: plain ASCII up to the closing quote, else the general scan. This loop and
		// the string value's below are written out where they run: as a function (too large
		// to be inlined) the call made Scan 15-25% slower in WebAssembly.
		j := i + 1
		for {
			if j+8 > len(data) {
				for j < len(data) && plainByte[data[j]] {
					j++
				}
				break
			}
			if m := specialBytes(binary.LittleEndian.Uint64(data[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		kplain := true
		if j < len(data) && data[j] == '"' {
			j++
		} else if j, kplain = scanString(data, i); j < 0 {
			return
		}
		match := -1
		if kplain {
			// One candidate from the key's length and first and last bytes, compared eight
			// bytes at a time; a slot that several keys share is searched.
			n := j - i - 2
			if sl := f.slot[keySlot(n, data[i+1], data[j-2])]; sl > 0 {
				k := int(sl - 1)
				if fk := &f.keys[k]; len(fk.name) == n && f.spans[k].gen != f.gen {
					if n <= 16 && i+9 <= len(data) {
						if binary.LittleEndian.Uint64(data[i+1:])&fk.m0 == fk.w0 &&
							(n <= 8 || binary.LittleEndian.Uint64(data[j-9:]) == fk.w1) {
							match = k
						}
					} else if bytesString(data[i+1:j-1]) == fk.name {
						match = k
					}
				}
			} else if sl < 0 {
				for k := range f.keys {
					if f.spans[k].gen != f.gen && plainKeyIs(data, i+1, j-1, &f.keys[k]) {
						match = k
						break
					}
				}
			}
		} else {
			for k := range f.keys {
				if f.spans[k].gen != f.gen && keyEqual(data[i+1:j-1], false, f.keys[k].name) {
					match = k
					break
				}
			}
		}
		// ':' and the value.
		if j < len(data) && data[j] == ':' {
			i = j + 1
		} else if i = skipWS(data, j); i < len(data) && data[i] == ':' {
			i++
		} else {
			return
		}
		if i < len(data) && data[i] <= ' ' {
			i = skipWS(data, i)
		}
		if i >= len(data) {
			return
		}
		start := i
		plain := false
		switch c := data[i]; {
		case c == '"':
			j = i + 1
			for {
				if j+8 > len(data) {
					for j < len(data) && plainByte[data[j]] {
						j++
					}
					break
				}
				if m := specialBytes(binary.LittleEndian.Uint64(data[j:])); m != 0 {
					j += bits.TrailingZeros64(m) >> 3
					break
				}
				j += 8
			}
			if j < len(data) && data[j] == '"' {
				j, plain = j+1, true
			} else if j, plain = scanString(data, i); j < 0 {
				return
			}
		case c-'1' <= 8 || c == '-' && i+1 < len(data) && data[i+1]-'1' <= 8:
			// An integer without a leading zero: its digits (eight at a time), then anything
			// but a fraction or an exponent.
			j = i + 1
			if c == '-' {
				j++
			}
			for {
				if j+8 > len(data) {
					for j < len(data) && data[j]-'0' <= 9 {
						j++
					}
					break
				}
				if m := nonDigits(binary.LittleEndian.Uint64(data[j:])); m != 0 {
					j += bits.TrailingZeros64(m) >> 3
					break
				}
				j += 8
			}
			if j < len(data) && (data[j] == '.' || data[j]|0x20 == 'e') {
				if j = skipNumber(data, i); j < 0 {
					return
				}
			}
		default:
			if j = skipValue(data, i, 1); j < 0 { // the object itself is level 1
				return
			}
		}
		// ',' or '}'.
		if j >= len(data) {
			return
		}
		i = j // the separator, after the value data[start:j]
		sep := data[i]
		if sep != ',' && sep != '}' {
			if i = skipWS(data, j); i >= len(data) {
				return
			}
			if sep = data[i]; sep != ',' && sep != '}' {
				return
			}
		}
		if match >= 0 {
			f.spans[match] = fieldSpan{start, j, f.gen, plain}
			if f.left--; f.left == 0 {
				return
			}
		}
		if sep == '}' {
			return
		}
		i++
		if i < len(data) && data[i] != '"' {
			i = skipWS(data, i)
		}
	}
}

// fromIndex reads the fields of data, the current event's data of batch b, from the batch's field
// index, registering the keys with b's host first when they are not registered with it. It
// reports false, and changes no field, when it cannot: the batch or the event is not indexed, or
// the index lacks a key.
func (f *JSONFields) fromIndex(b *Batch, data []byte) bool {
	if f.regGen != b.regGen {
		f.register(b)
	}
	index := b.ev.Index // nil when the event is not indexed
	if f.maxSlot < 0 || f.maxSlot >= b.r.Fields() || len(index) < (f.maxSlot+1)*abi.FieldEntryLen {
		return false
	}
	f.data = data
	f.gen++
	for k, s := range f.slots {
		// abi.FieldEntry written out: as a call (too large to be inlined) it costs one per key.
		// The reader checked that the value is not empty and lies within data.
		e := index[int(s)*abi.FieldEntryLen:]
		start := binary.LittleEndian.Uint32(e)
		if start == abi.FieldAbsent {
			continue
		}
		n := binary.LittleEndian.Uint32(e[4:])
		f.spans[k] = fieldSpan{int(start), int(start + n&0x7FFFFFFF), f.gen, n>>31 == 0} // bit 31: a string with an escape
	}
	return true
}

// register registers f's keys with the field import of b's host, the one of b.regGen, stopping
// at the first the host refuses (then f does not use the index with this host).
func (f *JSONFields) register(b *Batch) {
	f.regGen = b.regGen
	f.maxSlot = -1
	top := -1
	for k := range f.keys {
		s := b.fieldSlot(f.keys[k].name)
		if s < 0 {
			return
		}
		f.slots[k] = uint8(s)
		top = max(top, s)
	}
	f.maxSlot = top
}

// plainKeyIs reports whether data[start:end], a key without escapes followed by its closing
// quote, is fk's name.
func plainKeyIs(data []byte, start, end int, fk *fieldKey) bool {
	n := end - start
	if len(fk.name) != n {
		return false
	}
	if start+8 > len(data) || n > 16 {
		return bytesString(data[start:end]) == fk.name
	}
	return binary.LittleEndian.Uint64(data[start:])&fk.m0 == fk.w0 &&
		(n <= 8 || binary.LittleEndian.Uint64(data[end-8:]) == fk.w1)
}

// nonDigits flags the bytes of x, eight bytes in little-endian order, that are not ASCII digits,
// with the same rule as specialBytes: only the lowest set bit (the high bit of the first
// non-digit) may be used; 0 when all eight are digits.
func nonDigits(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return ((x - ones*'0') | (x + ones*(0x80-'9'-1))) & highs
}

// specialBytes flags the bytes of x, eight string bytes in little-endian order, that are not
// plainByte: the lowest set bit is the high bit of the first '"', '\\', control byte (< 0x20) or
// non-ASCII byte (>= 0x80); 0 when all eight are plain. Bits above the lowest may be false
// positives (borrows propagate upward), so only the lowest may be used.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (x - ones*0x20) | x) & highs
}

// Raw returns the raw JSON text of field i, as JSONRaw.
func (f *JSONFields) Raw(i int) ([]byte, bool) {
	sp := &f.spans[i]
	if sp.gen != f.gen {
		return nil, false
	}
	return f.data[sp.start:sp.end], true
}

// Int returns field i when it is an integer literal that fits in an int64, as JSONInt.
func (f *JSONFields) Int(i int) (int64, bool) {
	sp := &f.spans[i]
	if sp.gen != f.gen {
		return 0, false
	}
	d := f.data[sp.start:sp.end]
	if len(d) == 0 || len(d) > 18 || d[0] == '-' {
		return parseJSONInt(d)
	}
	// Up to 18 digits, the usual case, here without a second call: no overflow possible.
	var u int64
	for _, c := range d {
		if c-'0' > 9 {
			return 0, false
		}
		u = u*10 + int64(c-'0')
	}
	return u, true
}

// String returns the unescaped value of string field i, as JSONString: it aliases the scanned
// data unless the string has escapes or invalid UTF-8 (then it is a new slice).
func (f *JSONFields) String(i int) ([]byte, bool) {
	sp := &f.spans[i]
	if sp.gen != f.gen || f.data[sp.start] != '"' {
		return nil, false
	}
	raw := f.data[sp.start+1 : sp.end-1]
	if sp.plain {
		return raw, true
	}
	return unescapeJSON(make([]byte, 0, len(raw)), raw), true
}
