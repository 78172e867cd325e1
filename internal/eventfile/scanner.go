package eventfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/projhost/projhost/wasmabi"
)

// maxDepth is encoding/json's nesting limit (its scanner's maxNestingDepth): an element may
// nest objects and arrays 10000 deep, counting itself.
const maxDepth = 10000

// errMore is returned by object when the buffer ends before the element does.
var errMore = errors.New("eventfile: need more input")

// syntaxError is a JSON syntax error at byte off of the element.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s (byte %d of the element)", e.msg, e.off) }

// keyError is an element that is valid JSON with no usable key field.
type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }

// Bytes that end a run of plain string bytes: '"', '\\' and the control characters.
var stringStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// objectScanner checks, compacts and finds the key field of one JSON object in a single pass
// over its bytes. It accepts what encoding/json accepts (invalid UTF-8 inside strings
// included), compacts as json.Compact does (drops the white space between tokens) and takes
// the key field's value as encoding/json's decoding into a map would (the last of duplicate
// names; names compared after unescaping). Make one with newObjectScanner; it is not safe
// for concurrent use.
type objectScanner struct {
	keyField string
	plain    bool   // keyField is valid UTF-8 without U+FFFD: an unescaped name is it iff equal
	stack    []bool // open containers: true for an object
	out      []byte // the compacted element when it held white space between tokens
	keys     map[string]string

	// Results of the last object call.
	compacted        bool // out holds the element (white space was dropped)
	keyStart, keyEnd int  // the key field's value in the element; keyEnd 0 when absent
	keyEsc           bool // the key field's value is a string with escapes
}

func newObjectScanner(keyField string) *objectScanner {
	return &objectScanner{keyField: keyField,
		plain: utf8.ValidString(keyField) && !strings.ContainsRune(keyField, utf8.RuneError)}
}

// object scans the JSON object at the start of b (b[0] == '{') and returns the length of its
// text in b. Errors: errMore when b ends before the object does (b may be a prefix of the
// input), *syntaxError.
func (s *objectScanner) object(b []byte) (int, error) {
	s.stack = s.stack[:0]
	s.out = s.out[:0]
	s.compacted = false
	s.keyStart, s.keyEnd = 0, 0
	seg := 0          // start of the bytes not yet copied to out (once compacting)
	keyDepth := false // the value being scanned is the key field's, at depth 1
	lastEsc := false  // the last string value held escapes
	i := 0

	// skip passes white space at b[i:], copying what came before to out the first time.
	skip := func() {
		if i < len(b) && isSpace(b[i]) {
			s.out = append(s.out, b[seg:i]...)
			s.compacted = true
			for i++; i < len(b) && isSpace(b[i]); i++ {
			}
			seg = i
		}
	}
	bad := func(what string) error {
		if i >= len(b) {
			return errMore
		}
		return &syntaxError{msg: fmt.Sprintf("invalid character %s %s", quoteChar(b[i]), what), off: i}
	}

value:
	if i >= len(b) {
		return 0, errMore
	}
	if keyDepth && len(s.stack) == 1 {
		s.keyStart = i
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if len(s.stack) >= maxDepth {
			return 0, &syntaxError{msg: "exceeded max depth", off: i}
		}
		obj, closer := c == '{', byte(']')
		if obj {
			closer = '}'
		}
		s.stack = append(s.stack, obj)
		i++
		skip()
		if i < len(b) && b[i] == closer {
			i++
			s.stack = s.stack[:len(s.stack)-1]
			goto after
		}
		if obj {
			goto name
		}
		goto value
	case c == '"':
		n, esc, err := scanString(b[i:])
		if err != nil {
			return 0, offset(err, i)
		}
		lastEsc = esc
		i += n
	case c == '-' || c >= '0' && c <= '9':
		n, err := scanNumber(b[i:])
		if err != nil {
			return 0, offset(err, i)
		}
		i += n
	case c == 't' || c == 'f' || c == 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		for k := 1; k < len(lit); k++ {
			if i+k >= len(b) {
				return 0, errMore
			}
			if b[i+k] != lit[k] {
				i += k
				return 0, bad("in literal " + lit + " (expecting " + quoteChar(lit[k]) + ")")
			}
		}
		i += len(lit)
	default:
		return 0, bad("looking for beginning of value")
	}

after:
	if keyDepth && len(s.stack) == 1 {
		s.keyEnd, s.keyEsc = i, lastEsc
		keyDepth = false
	}
	if len(s.stack) == 0 {
		if s.compacted {
			s.out = append(s.out, b[seg:i]...)
		}
		return i, nil
	}
	skip()
	if i >= len(b) {
		return 0, errMore
	}
	{
		obj := s.stack[len(s.stack)-1]
		closer, where := byte(']'), "after array element"
		if obj {
			closer, where = '}', "after object key:value pair"
		}
		switch b[i] {
		case ',':
			i++
			skip()
			if obj {
				goto name
			}
			goto value
		case closer:
			i++
			s.stack = s.stack[:len(s.stack)-1]
			goto after
		}
		return 0, bad(where)
	}

name:
	if i >= len(b) {
		return 0, errMore
	}
	if b[i] != '"' {
		return 0, bad("looking for beginning of object key string")
	}
	{
		n, esc, err := scanString(b[i:])
		if err != nil {
			return 0, offset(err, i)
		}
		if len(s.stack) == 1 && s.isKeyField(b[i:i+n], esc) {
			keyDepth = true
		}
		i += n
	}
	skip()
	if i >= len(b) {
		return 0, errMore
	}
	if b[i] != ':' {
		return 0, bad("after object key")
	}
	i++
	skip()
	goto value
}

// isKeyField reports whether the quoted object name q is keyField once decoded.
func (s *objectScanner) isKeyField(q []byte, esc bool) bool {
	raw := q[1 : len(q)-1]
	if !esc && (s.plain || utf8.Valid(raw)) {
		// Without escapes a name decodes to itself, or (invalid UTF-8) to text with U+FFFD.
		return string(raw) == s.keyField
	}
	// Escapes or invalid UTF-8 (which encoding/json decodes as U+FFFD): decode as it does.
	var name string
	return json.Unmarshal(q, &name) == nil && name == s.keyField
}

// key returns the partition key of the last scanned object b: its key field, a non-empty
// string (as encoding/json decodes it; its text must be valid UTF-8 and hold no NUL) or a
// number (as its text), of at most wasmabi.MaxKeyChars Unicode characters. Errors: *keyError.
func (s *objectScanner) key(b []byte) (string, error) {
	f := s.keyField
	if s.keyEnd == 0 {
		return "", &keyError{fmt.Sprintf("no field %q to use as the partition key (choose another with --key-field)", f)}
	}
	v := b[s.keyStart:s.keyEnd]
	var key string
	switch c := v[0]; {
	case c == '"':
		raw := v[1 : len(v)-1]
		if !utf8.Valid(raw) {
			return "", &keyError{fmt.Sprintf("field %q is not valid UTF-8 or contains NUL: partition keys are Unicode strings", f)}
		}
		if !s.keyEsc {
			key = s.intern(raw)
		} else if key = unquote(v); key == "" {
			return "", &keyError{fmt.Sprintf("field %q is empty or not a valid string", f)}
		}
		if key == "" {
			return "", &keyError{fmt.Sprintf("field %q is empty or not a valid string", f)}
		}
		if strings.IndexByte(key, 0) >= 0 {
			return "", &keyError{fmt.Sprintf("field %q is not valid UTF-8 or contains NUL: partition keys are Unicode strings", f)}
		}
	case c == '-' || c >= '0' && c <= '9':
		key = s.intern(v)
	default:
		return "", &keyError{fmt.Sprintf("field %q is a %s, want a string or a number", f, kind(c))}
	}
	if n := utf8.RuneCountInString(key); n > wasmabi.MaxKeyChars {
		return "", &keyError{fmt.Sprintf("field %q is %d characters long; partition keys are at most %d characters (the Kinesis limit): shorten it or choose another --key-field",
			f, n, wasmabi.MaxKeyChars)}
	}
	return key, nil
}

// unquote decodes the JSON string q as encoding/json does ("" if it cannot).
func unquote(q []byte) string {
	var s string
	if json.Unmarshal(q, &s) != nil {
		return ""
	}
	return s
}

// maxInterned bounds the keys intern remembers (it forgets them all when full).
const maxInterned = 4096

// intern returns string(b), the same string for the same bytes while the table lasts: keys
// repeat, so most events allocate none.
func (s *objectScanner) intern(b []byte) string {
	if k, ok := s.keys[string(b)]; ok {
		return k
	}
	if s.keys == nil || len(s.keys) >= maxInterned {
		s.keys = make(map[string]string)
	}
	k := string(b)
	s.keys[k] = k
	return k
}

func kind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return "null"
}

// scanString returns the length of the JSON string at the start of b (b[0] == '"') and whether
// it holds escapes. Errors: errMore, *syntaxError (offsets in b).
func scanString(b []byte) (n int, esc bool, err error) {
	i := 1
	for {
		for i < len(b) && !stringStop[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, esc, errMore
		}
		switch c := b[i]; c {
		case '"':
			return i + 1, esc, nil
		case '\\':
			esc = true
			if i+1 >= len(b) {
				return 0, esc, errMore
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k >= len(b) {
						return 0, esc, errMore
					}
					if !isHex(b[i+k]) {
						return 0, esc, &syntaxError{msg: "invalid character " + quoteChar(b[i+k]) + " in \\u hexadecimal character escape", off: i + k}
					}
				}
				i += 6
			default:
				return 0, esc, &syntaxError{msg: "invalid character " + quoteChar(b[i+1]) + " in string escape code", off: i + 1}
			}
		default:
			return 0, esc, &syntaxError{msg: "invalid character " + quoteChar(c) + " in string literal", off: i}
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber returns the length of the JSON number at the start of b. A number running to the
// end of b is errMore: more digits may follow. Errors: errMore, *syntaxError.
func scanNumber(b []byte) (int, error) {
	i := 0
	if b[0] == '-' {
		i++
	}
	digits := func(what string) error {
		if i >= len(b) {
			return errMore
		}
		if !isDigit(b[i]) {
			return &syntaxError{msg: "invalid character " + quoteChar(b[i]) + " " + what, off: i}
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		return nil
	}
	if i >= len(b) {
		return 0, errMore
	}
	if b[i] == '0' {
		i++
	} else if err := digits("in numeric literal"); err != nil {
		return 0, err
	}
	if i < len(b) && b[i] == '.' {
		i++
		if err := digits("after decimal point in numeric literal"); err != nil {
			return 0, err
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if err := digits("in exponent of numeric literal"); err != nil {
			return 0, err
		}
	}
	if i >= len(b) {
		return 0, errMore
	}
	return i, nil
}

// offset moves a *syntaxError's offset by d.
func offset(err error, d int) error {
	if se, ok := err.(*syntaxError); ok {
		se.off += d
	}
	return err
}

// quoteChar formats c as encoding/json's errors do.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := fmt.Sprintf("%q", string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}
