package event

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// docScanner checks the document rule (CheckDoc) in one pass over the document: the JSON
// syntax as encoding/json's scanner takes it (json.Valid), UTF-8, and the rule's limits. It
// stops at the first problem; CheckDoc then orders the errors (syntax, encoding, rule) on the
// error path only.
type docScanner struct {
	doc []byte
	pos int
	// rule is the broken rule when a method returned scanStop; nil when it stopped on invalid
	// UTF-8. Its path grows as the containers return.
	rule *pathError
	// esc holds the unescaped keys with escapes of the objects being scanned (members).
	esc []byte
	// names and spans: IndexFields's, recorded by members at depth 1; nil for CheckDoc.
	names []string
	spans []FieldSpan
}

// scanResult is how a docScanner method ended.
type scanResult uint8

const (
	scanOK     scanResult = iota
	scanSyntax            // not JSON as json.Valid decides, or the document is not an object
	scanStop              // invalid UTF-8 in a string, or docScanner.rule
)

// maxLinearKeys: objects with at most this many keys are checked for duplicates by comparing
// each key with the ones before (no allocation); larger ones use a set.
const maxLinearKeys = 16

// strPlain marks the bytes a JSON string holds as they are: ASCII from U+0020, except '"' and
// '\'. Others end the fast loop of str.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// document scans the whole document: white space, one object, white space.
func (s *docScanner) document() scanResult {
	s.ws()
	if s.pos == len(s.doc) || s.doc[s.pos] != '{' {
		return scanSyntax
	}
	if r := s.object(1); r != scanOK {
		return r
	}
	s.ws()
	if s.pos != len(s.doc) {
		return scanSyntax
	}
	return scanOK
}

func (s *docScanner) ws() {
	for s.pos < len(s.doc) {
		switch s.doc[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *docScanner) fail(msg string) scanResult {
	s.rule = &pathError{msg: msg}
	return scanStop
}

// value scans the value at s.pos (white space skipped), found where a container would be
// depth deep.
func (s *docScanner) value(depth int) scanResult {
	if s.pos >= len(s.doc) {
		return scanSyntax
	}
	switch c := s.doc[s.pos]; {
	case c == '{' || c == '[':
		if depth > MaxDocDepth {
			return s.fail(fmt.Sprintf("objects and arrays nested more than %d deep", MaxDocDepth))
		}
		if c == '{' {
			return s.object(depth)
		}
		return s.array(depth)
	case c == '"':
		_, r := s.str(false)
		return r
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return scanSyntax
}

func (s *docScanner) literal(word string) scanResult {
	if !bytes.HasPrefix(s.doc[s.pos:], []byte(word)) {
		return scanSyntax
	}
	s.pos += len(word)
	return scanOK
}

// object scans the object at s.pos ('{'), depth deep.
func (s *docScanner) object(depth int) scanResult {
	escBase := len(s.esc)
	r := s.members(depth)
	s.esc = s.esc[:escBase]
	return r
}

func (s *docScanner) members(depth int) scanResult {
	if s.empty('}') {
		return scanOK
	}
	// The unescaped keys so far: the first maxLinearKeys in small (a key without escapes
	// aliases doc, one with escapes s.esc), all of them in set once there are more. small is
	// a local array, not a field of s: stored through s, it would go to the heap.
	var (
		small [maxLinearKeys][]byte
		n     int
		set   map[string]struct{}
	)
	for {
		if s.pos >= len(s.doc) || s.doc[s.pos] != '"' {
			return scanSyntax
		}
		k, r := s.str(true)
		if r != scanOK {
			return r
		}
		switch {
		case len(k) == 0:
			return s.fail(fmt.Sprintf("an empty object key (keys take 1 to %d bytes)", MaxFieldNameBytes))
		case len(k) > MaxFieldNameBytes:
			return s.fail(fmt.Sprintf("an object key of %d bytes (keys take 1 to %d bytes)", len(k), MaxFieldNameBytes))
		case seen(k, small[:min(n, maxLinearKeys)], set):
			s.fail("the key appears twice in one object (keys must be unique)")
			s.rule.in(fieldSeg(k))
			return scanStop
		}
		switch {
		case n < maxLinearKeys:
			small[n] = k
		case set == nil:
			set = make(map[string]struct{}, 4*maxLinearKeys)
			for _, k := range small {
				set[string(k)] = struct{}{}
			}
			fallthrough
		default:
			set[string(k)] = struct{}{}
		}
		n++
		s.ws()
		if s.pos >= len(s.doc) || s.doc[s.pos] != ':' {
			return scanSyntax
		}
		s.pos++
		s.ws()
		vstart := s.pos
		if r := s.value(depth + 1); r != scanOK {
			if r == scanStop && s.rule != nil {
				s.rule.in(fieldSeg(k))
			}
			return r
		}
		if depth == 1 && s.names != nil {
			s.indexMember(k, vstart, s.pos)
		}
		if more, r := s.more('}'); !more {
			return r
		}
	}
}

// empty scans the start of a container (at its '{' or '[') and reports whether it ends at
// once, with end.
func (s *docScanner) empty(end byte) bool {
	s.pos++
	s.ws()
	if s.pos < len(s.doc) && s.doc[s.pos] == end {
		s.pos++
		return true
	}
	return false
}

// more scans what follows a member or an element: a ',' (more follows: true) or end (the
// container ends: false, scanOK); anything else is scanSyntax.
func (s *docScanner) more(end byte) (bool, scanResult) {
	s.ws()
	if s.pos < len(s.doc) {
		switch s.doc[s.pos] {
		case ',':
			s.pos++
			s.ws()
			return true, scanOK
		case end:
			s.pos++
			return false, scanOK
		}
	}
	return false, scanSyntax
}

func seen(k []byte, keys [][]byte, set map[string]struct{}) bool {
	if set != nil {
		_, ok := set[string(k)]
		return ok
	}
	for _, s := range keys {
		if bytes.Equal(s, k) {
			return true
		}
	}
	return false
}

// array scans the array at s.pos ('['), depth deep.
func (s *docScanner) array(depth int) scanResult {
	if s.empty(']') {
		return scanOK
	}
	for i := 0; ; i++ {
		if r := s.value(depth + 1); r != scanOK {
			if r == scanStop && s.rule != nil {
				s.rule.in("[" + strconv.Itoa(i) + "]")
			}
			return r
		}
		if more, r := s.more(']'); !more {
			return r
		}
	}
}

// str scans the string at s.pos ('"'). With unescape it returns its contents as encoding/json
// unescapes them: a slice of doc when it has no escapes, else of s.esc.
func (s *docScanner) str(unescape bool) ([]byte, scanResult) {
	doc := s.doc
	i := s.pos + 1
	start, run := i, i // run: the first byte not yet copied to s.esc
	escStart := -1     // where the string starts in s.esc once it had an escape
	for {
		for i < len(doc) && strPlain[doc[i]] {
			i++
		}
		if i >= len(doc) {
			return nil, scanSyntax
		}
		switch c := doc[i]; {
		case c == '"':
			s.pos = i + 1
			if escStart < 0 {
				return doc[start:i], scanOK
			}
			s.esc = append(s.esc, doc[run:i]...)
			return s.esc[escStart:], scanOK
		case c == '\\':
			if unescape {
				if escStart < 0 {
					escStart = len(s.esc)
				}
				s.esc = append(s.esc, doc[run:i]...)
			}
			n := s.escape(i, unescape)
			if n == 0 {
				return nil, scanSyntax
			}
			i += n
			run = i
		case c < 0x20:
			return nil, scanSyntax
		default:
			r, size := utf8.DecodeRune(doc[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, scanStop // s.rule stays nil: invalid UTF-8
			}
			i += size
		}
	}
}

// escapes maps the byte after '\' of a one-character escape to the byte it stands for; 0: not
// one.
var escapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape scans the escape at doc[i] ('\') and returns its length, 0 when it is not one; with
// unescape it appends what it stands for to s.esc, as encoding/json does: a \u escape of a
// surrogate is decoded with the \u escape after it when the two make a pair, else it stands for
// U+FFFD (and the next escape is read by itself).
func (s *docScanner) escape(i int, unescape bool) int {
	doc := s.doc
	if i+1 >= len(doc) {
		return 0
	}
	if e := escapes[doc[i+1]]; e != 0 {
		if unescape {
			s.esc = append(s.esc, e)
		}
		return 2
	}
	if doc[i+1] != 'u' {
		return 0
	}
	r := hex4(doc[i+2:])
	if r < 0 {
		return 0
	}
	if !unescape {
		return 6
	}
	n := 6
	if utf16.IsSurrogate(r) {
		r2 := rune(-1)
		if len(doc) >= i+12 && doc[i+6] == '\\' && doc[i+7] == 'u' {
			r2 = hex4(doc[i+8:])
		}
		if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
			r, n = d, 12
		} else {
			r = utf8.RuneError
		}
	}
	s.esc = utf8.AppendRune(s.esc, r)
	return n
}

// hex4 decodes 4 hex digits at the start of b; -1 when there are none.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// number scans the number at s.pos (JSON's grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?) and
// checks it as CheckNumber does, without a second pass over it.
func (s *docScanner) number() scanResult {
	doc := s.doc
	start, i := s.pos, s.pos
	if doc[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(doc) && doc[i] == '0':
		i++
	case i < len(doc) && doc[i] >= '1' && doc[i] <= '9':
		i = digits(doc, i+1)
	default:
		return scanSyntax
	}
	intPart, frac := doc[intStart:i], doc[i:i]
	if i < len(doc) && doc[i] == '.' {
		j := digits(doc, i+1)
		if j == i+1 {
			return scanSyntax
		}
		frac, i = doc[i+1:j], j
	}
	var exp int64 // the exponent; its magnitude is not counted past 1<<31
	expOK := true
	if i < len(doc) && doc[i]|0x20 == 'e' {
		i++
		neg := false
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			neg = doc[i] == '-'
			i++
		}
		j := i
		for ; j < len(doc) && doc[j] >= '0' && doc[j] <= '9'; j++ {
			if exp <= 1<<31 {
				exp = exp*10 + int64(doc[j]-'0')
			}
		}
		if j == i {
			return scanSyntax
		}
		i = j
		// strconv.ParseInt(exponent, 10, 32), as CheckNumber reads it.
		if neg {
			expOK, exp = exp <= 1<<31, -exp
		} else {
			expOK = exp <= 1<<31-1
		}
	}
	s.pos = i
	if !expOK || !numberInRange(intPart, frac, exp) {
		// CheckNumber says why (the error path only).
		msg := "number breaks the number rule"
		if err := CheckNumber(string(doc[start:i])); err != nil {
			msg = err.Error()
		}
		return s.fail(msg)
	}
	return scanOK
}

// digits returns the index of the first byte at or after i in b that is not a decimal digit.
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// numberInRange reports whether the decimal number intPart.frac × 10^exp (digits only) has at
// most MaxNumberDigits significant digits and, unless it is zero, its leading digit's power of
// ten is within MinNumberExp..MaxNumberExp: splitNumber's rule.
func numberInRange(intPart, frac []byte, exp int64) bool {
	all := len(intPart) + len(frac)
	lo := 0 // the first significant digit, an index into intPart+frac
	for lo < len(intPart) && intPart[lo] == '0' {
		lo++
	}
	if lo == len(intPart) {
		j := 0
		for j < len(frac) && frac[j] == '0' {
			j++
		}
		if j == len(frac) {
			return true // zero
		}
		lo += j
	}
	hi := len(frac) // one past the last significant digit
	for hi > 0 && frac[hi-1] == '0' {
		hi--
	}
	if hi > 0 {
		hi += len(intPart)
	} else {
		hi = len(intPart)
		for intPart[hi-1] == '0' {
			hi--
		}
	}
	n := int64(hi - lo)
	lead := n - 1 + exp - int64(len(frac)) + int64(all-hi)
	return n <= MaxNumberDigits && lead >= MinNumberExp && lead <= MaxNumberExp
}
