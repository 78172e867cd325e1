// Package eventfile streams events from the files users feed projhost: a JSON array of objects,
// or JSON lines (one object per line; concatenated objects work too), optionally gzip-compressed
// (detected by the gzip magic bytes, not the file name).
package eventfile

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// ErrBadInput is wrapped by every error about the content of an events file.
var ErrBadInput = errors.New("eventfile: bad input")

// Scan reads every element of r in order and calls fn with its 0-based index, the value of its
// top-level field keyField (the partition key) and its raw JSON bytes (compacted as
// json.Compact does, valid until fn returns).
//
// The input is what encoding/json's Decoder reads: one JSON array of elements, or elements one
// after the other, separated by white space or nothing; invalid UTF-8 inside strings passes
// through as it does there. Each element is read in one pass that checks it, compacts it and
// finds keyField. The key is keyField's value as encoding/json decodes the object into a map
// (the last of duplicate names; names compared after unescaping): a non-empty string whose text
// is valid UTF-8 and decodes to no NUL, or a number (its text), of at most wasmabi.MaxKeyChars
// Unicode characters (the Kinesis limit, counted in characters, not bytes).
//
// An element that is not a JSON object, is not valid JSON, or has no usable keyField, stops the
// scan with an error wrapping ErrBadInput that names the element's index. An error returned by
// fn stops the scan and is returned as is; a read error is returned wrapped.
func Scan(r io.Reader, keyField string, fn func(i int, key string, raw []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	src := io.Reader(br)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%w: gzip header: %v", ErrBadInput, err)
		}
		defer zr.Close()
		src = gzipReader{zr}
	}
	in := &input{src: src, buf: make([]byte, 1<<16)}
	in.fill(3)
	if b := in.rest(); len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		in.pos += 3 // a UTF-8 byte order mark carries no data
	}
	c, err := in.nonSpace()
	if err != nil || c == atEnd {
		return err // an empty file: no events
	}
	sc := newObjectScanner(keyField)
	array := c == '['
	if array {
		in.pos++
		if c, err = in.nonSpace(); err != nil {
			return err
		}
		if c == ']' {
			in.pos++
			return in.end()
		}
	}
	for i := 0; ; i++ {
		raw, err := in.element(sc, i)
		if err != nil {
			return err
		}
		key, err := sc.key(raw)
		if err != nil {
			return fmt.Errorf("%w: element %d: %w", ErrBadInput, i, err)
		}
		if sc.compacted {
			raw = sc.out
		}
		if err := fn(i, key, raw); err != nil {
			return err
		}
		if c, err = in.nonSpace(); err != nil {
			return err
		}
		if !array {
			if c == atEnd {
				return nil
			}
			continue
		}
		switch c {
		case ']':
			in.pos++
			return in.end()
		case ',':
			in.pos++
			if c, err = in.nonSpace(); err != nil {
				return err
			}
			if c == ']' {
				return fmt.Errorf("%w: element %d: invalid character ']' looking for beginning of value (want a JSON array of objects or one JSON object per line)", ErrBadInput, i+1)
			}
		case atEnd:
			return fmt.Errorf("%w: after element %d: unexpected end of input (the JSON array is not closed)", ErrBadInput, i)
		default:
			return fmt.Errorf("%w: after element %d: invalid character %s after array element", ErrBadInput, i, quoteChar(byte(c)))
		}
	}
}

// input is Scan's buffer over the (decompressed) input: buf[pos:n] is read and not consumed.
type input struct {
	src    io.Reader
	buf    []byte
	pos, n int
	eof    bool  // src is read to its end, or failed
	err    error // src's error other than io.EOF, returned once the bytes before it are used
}

func (in *input) rest() []byte { return in.buf[in.pos:in.n] }

// fill reads until at least want bytes are buffered or the input ends, moving the unconsumed
// bytes to the front and growing the buffer when they fill it.
func (in *input) fill(want int) {
	if in.pos > 0 {
		in.n = copy(in.buf, in.buf[in.pos:in.n])
		in.pos = 0
	}
	if want > len(in.buf) {
		in.buf = append(in.buf, make([]byte, max(want, 2*len(in.buf))-len(in.buf))...)
	}
	for in.n < want && !in.eof {
		m, err := in.src.Read(in.buf[in.n:])
		in.n += m
		if err != nil {
			in.eof = true
			if err != io.EOF {
				in.err = fmt.Errorf("eventfile: read: %w", err)
			}
		}
	}
}

// gzipReader marks the errors of a gzip stream as bad input.
type gzipReader struct{ zr *gzip.Reader }

func (g gzipReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: gzip: %w", ErrBadInput, err)
	}
	return n, err
}

// atEnd is nonSpace's result at the end of the input.
const atEnd = -1

// nonSpace consumes white space and returns the next byte, unconsumed, or atEnd.
func (in *input) nonSpace() (int, error) {
	for {
		for ; in.pos < in.n; in.pos++ {
			if c := in.buf[in.pos]; !isSpace(c) {
				return int(c), nil
			}
		}
		if in.eof {
			return atEnd, in.err
		}
		in.fill(1)
	}
}

// element scans element i, which starts at in.pos, and consumes it. The bytes returned are in
// the buffer, valid until the next call.
func (in *input) element(sc *objectScanner, i int) ([]byte, error) {
	for {
		b := in.rest()
		if len(b) == 0 {
			return nil, cmp.Or(in.err, fmt.Errorf("%w: element %d: unexpected end of input", ErrBadInput, i))
		}
		if b[0] != '{' {
			return nil, in.notObject(i)
		}
		n, err := sc.object(b)
		if err == nil {
			in.pos += n
			return b[:n], nil
		}
		if err != errMore {
			return nil, fmt.Errorf("%w: element %d: %v (want a JSON array of objects or one JSON object per line)", ErrBadInput, i, err)
		}
		if in.eof {
			if in.err != nil {
				return nil, in.err
			}
			return nil, fmt.Errorf("%w: element %d: unexpected end of input", ErrBadInput, i)
		}
		in.fill(len(b) + 1)
	}
}

// notObject is the error for element i, which does not start with '{'.
func (in *input) notObject(i int) error {
	b := in.rest()
	switch c := b[0]; {
	case c == '[' || c == '"' || c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		return fmt.Errorf("%w: element %d is not a JSON object: %s", ErrBadInput, i, abbrev(b))
	default:
		return fmt.Errorf("%w: element %d: invalid character %s looking for beginning of value (want a JSON array of objects or one JSON object per line)", ErrBadInput, i, quoteChar(c))
	}
}

// end checks that nothing but white space follows the closing ] of the array: concatenated
// arrays or trailing junk would otherwise be dropped silently.
func (in *input) end() error {
	c, err := in.nonSpace()
	if err != nil || c == atEnd {
		return err
	}
	return fmt.Errorf("%w: unexpected %q after the closing ] of the JSON array (one array per file; use JSON lines to concatenate)", ErrBadInput, rune(c))
}

func abbrev(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}
