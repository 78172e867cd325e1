// Package eventfile streams events from the files users feed projhost: a JSON array of objects,
// or JSON lines (one object per line; concatenated objects work too), optionally gzip-compressed
// (detected by the gzip magic bytes, not the file name).
package eventfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/buger/jsonparser"

	"github.com/projhost/projhost/wasmabi"
)

// ErrBadInput is wrapped by every error about the content of an events file.
var ErrBadInput = errors.New("eventfile: bad input")

// Scan reads every element of r in order and calls fn with its 0-based index, the value of its
// top-level string field keyField (the partition key; a number is accepted as its decimal text)
// and its raw JSON bytes (compacted, valid until fn returns). An element that is not a JSON
// object, or has no usable keyField, stops the scan with an error wrapping ErrBadInput that
// names the element's index. An error returned by fn stops the scan and is returned as is.
func Scan(r io.Reader, keyField string, fn func(i int, key string, raw []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%w: gzip header: %v", ErrBadInput, err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	if bom, err := br.Peek(3); err == nil && bom[0] == 0xEF && bom[1] == 0xBB && bom[2] == 0xBF {
		br.Discard(3) // a UTF-8 byte order mark carries no data
	}
	first, err := firstNonSpace(br)
	if err == io.EOF {
		return nil // empty file: no events
	}
	if err != nil {
		return err
	}
	dec := json.NewDecoder(br)
	if first == '[' {
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("%w: %v", ErrBadInput, err)
		}
	}
	var raw json.RawMessage
	var buf bytes.Buffer
	for i := 0; ; i++ {
		if first == '[' && !dec.More() {
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("%w: after element %d: %v", ErrBadInput, i, err)
			}
			// Nothing but white space may follow the array: concatenated arrays or trailing junk
			// would otherwise be dropped silently.
			if rest, err := firstNonSpace(bufio.NewReader(io.MultiReader(dec.Buffered(), br))); err != io.EOF {
				if err != nil {
					return err
				}
				return fmt.Errorf("%w: unexpected %q after the closing ] of the JSON array (one array per file; use JSON lines to concatenate)", ErrBadInput, rest)
			}
			return nil
		}
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			if err == io.EOF && first != '[' {
				return nil
			}
			return fmt.Errorf("%w: element %d: %v (want a JSON array of objects or one JSON object per line)", ErrBadInput, i, err)
		}
		if len(raw) == 0 || raw[0] != '{' {
			return fmt.Errorf("%w: element %d is not a JSON object: %s", ErrBadInput, i, abbrev(raw))
		}
		buf.Reset()
		if err := json.Compact(&buf, raw); err != nil {
			return fmt.Errorf("%w: element %d: %v", ErrBadInput, i, err)
		}
		data := buf.Bytes()
		key, err := Key(data, keyField)
		if err != nil {
			return fmt.Errorf("%w: element %d: %w", ErrBadInput, i, err)
		}
		if err := fn(i, key, data); err != nil {
			return err
		}
	}
}

// Key returns the partition key of one JSON object: its top-level field keyField, a non-empty
// string or a number (as its text), of at most wasmabi.MaxKeyChars Unicode characters (the
// Kinesis limit, counted in characters, not bytes).
func Key(obj []byte, keyField string) (string, error) {
	v, typ, _, err := jsonparser.Get(obj, keyField)
	if err != nil || typ == jsonparser.NotExist {
		return "", fmt.Errorf("no field %q to use as the partition key (choose another with --key-field)", keyField)
	}
	switch typ {
	case jsonparser.String:
		s, err := jsonparser.ParseString(v)
		if err != nil || s == "" {
			return "", fmt.Errorf("field %q is empty or not a valid string", keyField)
		}
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return "", fmt.Errorf("field %q is not valid UTF-8 or contains NUL: partition keys are Unicode strings", keyField)
		}
		return s, checkKeyLen(s, keyField)
	case jsonparser.Number:
		return string(v), checkKeyLen(string(v), keyField)
	default:
		return "", fmt.Errorf("field %q is a %s, want a string or a number", keyField, typ)
	}
}

// checkKeyLen refuses a key of more than wasmabi.MaxKeyChars characters (not bytes: Kinesis
// counts characters).
func checkKeyLen(key, keyField string) error {
	if n := utf8.RuneCountInString(key); n > wasmabi.MaxKeyChars {
		return fmt.Errorf("field %q is %d characters long; partition keys are at most %d characters (the Kinesis limit): shorten it or choose another --key-field",
			keyField, n, wasmabi.MaxKeyChars)
	}
	return nil
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b, br.UnreadByte()
	}
}

func abbrev(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}
