package event

import "bytes"

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
	s := docScanner{doc: doc, names: names, spans: spans}
	return s.document() == scanOK
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
