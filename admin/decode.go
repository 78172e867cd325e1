package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/projection"
)

// MaxShardIDBytes is the longest shard id a request may name (Kinesis's are at most 128).
const MaxShardIDBytes = 256

// decodeBody reads r's body into dst, a pointer to a struct whose json tags are fields,
// strictly: an empty body leaves dst as it is; otherwise the Content-Type must be
// application/json (or absent), the body at most Config.MaxBodyBytes and one JSON object
// whose keys are among fields exactly (case-sensitive), each once; values must fit dst's types.
func (a *API) decodeBody(w http.ResponseWriter, r *http.Request, dst any, fields ...string) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, "the body is over %d bytes: send only the fields of this route", tooLarge.Limit)
	}
	if err != nil {
		return errorf(http.StatusBadRequest, "reading the body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, "Content-Type %q: send application/json (curl: --json, or -H 'Content-Type: application/json')", clip(ct))
		}
	}
	return decodeJSON(b, dst, fields)
}

// decodeJSON is decodeBody's JSON part (for the fuzz test too).
func decodeJSON(b []byte, dst any, fields []string) error {
	want := "a JSON object"
	if len(fields) == 0 {
		want = "empty or {} (this route takes no field)"
	} else {
		want += " with the fields " + strings.Join(quoteAll(fields), ", ") + " (all optional unless said)"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errorf(http.StatusBadRequest, "the body must be %s", want)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return errorf(http.StatusBadRequest, "the body is not valid JSON (%v): send %s", err, want)
		}
		k, _ := t.(string) // object keys are strings
		switch {
		case !slices.Contains(fields, k):
			return errorf(http.StatusBadRequest, "unknown field %q: the body must be %s", clip(k), want)
		case seen[k]:
			return errorf(http.StatusBadRequest, "field %q is given twice: give it once", k)
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return errorf(http.StatusBadRequest, "the body is not valid JSON (%v): send %s", err, want)
		}
		if string(v) == "null" {
			// null would decode as an absent field: for "shard", every shard instead of one.
			return errorf(http.StatusBadRequest, "field %q is null: give a string, or leave the field out", k)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return errorf(http.StatusBadRequest, "the body is not valid JSON: send %s", want)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, "the body holds more than one JSON value: send one object, %s", want)
	}
	strict := json.NewDecoder(bytes.NewReader(b))
	strict.DisallowUnknownFields()
	if err := strict.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errorf(http.StatusBadRequest, "field %q: a JSON %s where a string is wanted (every field is a string)", te.Field, te.Value)
		}
		return errorf(http.StatusBadRequest, "the body: %v: send %s", err, want)
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// decodeQuery returns r's query parameters: only those in allowed, each at most once.
func decodeQuery(r *http.Request, allowed ...string) (map[string]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "the query string is not URL-encoded: %v", err)
	}
	out := map[string]string{}
	for k, vs := range q {
		switch {
		case !slices.Contains(allowed, k):
			if len(allowed) == 0 {
				return nil, errorf(http.StatusBadRequest, "unknown query parameter %q: this route takes none", clip(k))
			}
			return nil, errorf(http.StatusBadRequest, "unknown query parameter %q: use %s", clip(k), strings.Join(allowed, ", "))
		case len(vs) != 1:
			return nil, errorf(http.StatusBadRequest, "query parameter %q is given %d times: give it once", k, len(vs))
		}
		out[k] = vs[0]
	}
	return out, nil
}

// checkProjection checks the {name} of the path with projection.CheckName (400) and that it is
// the worker's projection (404).
func (a *API) checkProjection(name string, c *call) error {
	if err := projection.CheckName(name); err != nil {
		return errorf(http.StatusBadRequest, "projection name in the path: %v", err)
	}
	if name != a.cfg.Projection {
		return errorf(http.StatusNotFound, "this worker runs projection %q, not %q: ask a worker of %q (or use the CLI)", a.cfg.Projection, clip(name), clip(name))
	}
	c.param("projection", name)
	return nil
}

// checkShard checks a shard id: 1 to MaxShardIDBytes bytes of UTF-8 without control
// characters. what says where it came from, for the message.
func checkShard(id, what string) error {
	switch {
	case id == "":
		return errorf(http.StatusBadRequest, "%s is empty: name a shard (projhost status lists them), or leave it out for every shard where the route allows it", what)
	case len(id) > MaxShardIDBytes:
		return errorf(http.StatusBadRequest, "%s is %d bytes: a shard id has at most %d", what, len(id), MaxShardIDBytes)
	case !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0:
		return errorf(http.StatusBadRequest, "%s %q is not a shard id (UTF-8 without control characters; projhost status lists them)", what, clip(id))
	}
	return nil
}

// optionalShard checks a body's optional "shard": absent is "" (every shard).
func optionalShard(s *string, c *call) (string, error) {
	if s == nil {
		return "", nil
	}
	if err := checkShard(*s, `"shard"`); err != nil {
		return "", err
	}
	c.param("shard", *s)
	return *s, nil
}

// letterKey checks the {shard} and {seq} of a dead letter's path (deadletter.ValidateKey).
func letterKey(r *http.Request, projection string, c *call) (string, string, error) {
	shard, seq := r.PathValue("shard"), r.PathValue("seq")
	if err := checkShard(shard, "the shard in the path"); err != nil {
		return "", "", err
	}
	if err := deadletter.ValidateKey(projection, shard, seq); err != nil {
		return "", "", errorf(http.StatusBadRequest, "%v (deadletters list shows them)", err)
	}
	c.param("shard", shard)
	c.param("seq", seq)
	return shard, seq, nil
}

// versionNumber checks the {n} of a version's path: a decimal number from 1, canonical.
func versionNumber(r *http.Request, c *call) (int64, error) {
	s := r.PathValue("n")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != s {
		return 0, errorf(http.StatusBadRequest, "version %q: want a version number from 1, in decimal without leading zeros (GET .../versions lists them)", clip(s))
	}
	c.param("version", n)
	return n, nil
}
