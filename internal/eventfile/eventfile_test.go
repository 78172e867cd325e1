package eventfile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/wasmabi"
)

type rec struct {
	key, raw string
}

func scanAll(t *testing.T, in []byte, field string) ([]rec, error) {
	t.Helper()
	var out []rec
	err := Scan(bytes.NewReader(in), field, func(i int, key string, raw []byte) error {
		require.Equal(t, len(out), i)
		out = append(out, rec{key, string(raw)})
		return nil
	})
	return out, err
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func TestScan(t *testing.T) {
	two := []rec{{"DTW", `{"origin":"DTW","delay":66}`}, {"LAX", `{"origin":"LAX","delay":-3}`}}
	cases := []struct {
		name  string
		in    []byte
		want  []rec
		errIs string
	}{
		{"array", []byte(`[{"origin":"DTW","delay":66}, {"origin": "LAX", "delay": -3}]`), two, ""},
		{"lines", []byte("{\"origin\":\"DTW\",\"delay\":66}\n\n{\"origin\":\"LAX\",\"delay\":-3}\n"), two, ""},
		{"gzip array", gz(`[{"origin":"DTW","delay":66},{"origin":"LAX","delay":-3}]`), two, ""},
		{"gzip lines", gz("{\"origin\":\"DTW\",\"delay\":66}\n{\"origin\":\"LAX\",\"delay\":-3}"), two, ""},
		{"empty", []byte("  \n"), nil, ""},
		{"empty array", []byte("[]"), nil, ""},
		{"numeric key", []byte(`{"origin":42}`), []rec{{"42", `{"origin":42}`}}, ""},
		{"escaped key", []byte(`{"origin":"A\u0042C"}`), []rec{{"ABC", `{"origin":"A\u0042C"}`}}, ""},
		{"not object", []byte(`[{"origin":"DTW"}, 3]`), nil, "element 1 is not a JSON object"},
		{"missing key", []byte(`{"origin":"DTW"}` + "\n" + `{"dest":"X"}`), nil, `element 1: no field "origin"`},
		{"bool key", []byte(`{"origin":true}`), nil, "is a boolean"},
		{"truncated array", []byte(`[{"origin":"DTW"}`), nil, "ErrBadInput"},
		{"garbage line", []byte("{\"origin\":\"DTW\"}\nnot json\n"), nil, "element 1"},
		{"bad gzip", []byte{0x1f, 0x8b, 1, 2, 3}, nil, "gzip"},
		{"two arrays", []byte(`[{"origin":"A"}] [{"origin":"B"}]`), nil, "after the closing ]"},
		{"junk after array", []byte("[{\"origin\":\"A\"}]\nthis is junk"), nil, `unexpected 't'`},
		{"invalid utf8 key", []byte("{\"origin\":\"A\xffB\"}"), nil, "not valid UTF-8"},
		{"nul key", []byte(`{"origin":"a\u0000b"}`), nil, "contains NUL"},
		{"256 characters of 4 bytes", []byte(`{"origin":"` + strings.Repeat("😀", 256) + `"}`), []rec{{strings.Repeat("😀", 256), `{"origin":"` + strings.Repeat("😀", 256) + `"}`}}, ""},
		{"256 escaped characters", []byte(`{"origin":"` + strings.Repeat(`\ud83d\ude00`, 256) + `"}`), []rec{{strings.Repeat("😀", 256), `{"origin":"` + strings.Repeat(`\ud83d\ude00`, 256) + `"}`}}, ""},
		{"long key", []byte(`{"origin":"` + strings.Repeat("k", 257) + `"}`), nil, `field "origin" is 257 characters long; partition keys are at most 256 characters`},
		{"257 characters of 4 bytes", []byte(`{"origin":"` + strings.Repeat("😀", 257) + `"}`), nil, `field "origin" is 257 characters long`},
		{"256-digit number key", []byte(`{"origin":` + strings.Repeat("9", 256) + `}`), []rec{{strings.Repeat("9", 256), `{"origin":` + strings.Repeat("9", 256) + `}`}}, ""},
		{"257-digit number key", []byte(`{"origin":` + strings.Repeat("9", 257) + `}`), nil, `field "origin" is 257 characters long`},
		{"bom", append([]byte{0xEF, 0xBB, 0xBF}, `[{"origin":"DTW","delay":66},{"origin":"LAX","delay":-3}]`...), two, ""},
		{"array then space", []byte("[{\"origin\":\"DTW\",\"delay\":66},{\"origin\":\"LAX\",\"delay\":-3}]\n \n"), two, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := scanAll(t, c.in, "origin")
			if c.errIs != "" {
				require.Error(t, err)
				require.True(t, errors.Is(err, ErrBadInput), err)
				if c.errIs != "ErrBadInput" {
					require.Contains(t, err.Error(), c.errIs)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestScanStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Scan(strings.NewReader("{\"k\":\"a\"}\n{\"k\":\"b\"}\n"), "k", func(int, string, []byte) error { n++; return stop })
	require.Same(t, stop, err)
	require.Equal(t, 1, n)
}

func FuzzScan(f *testing.F) {
	f.Add([]byte(`[{"origin":"DTW","delay":66}]`))
	f.Add([]byte("{\"origin\":\"x\"}\n{\"origin\":1}"))
	f.Add(gz(`[{"origin":"DTW"}]`))
	f.Add([]byte(`[{"origin":"DTW"},`))
	f.Fuzz(func(t *testing.T, in []byte) {
		_ = Scan(bytes.NewReader(in), "origin", func(i int, key string, raw []byte) error {
			if key == "" || utf8.RuneCountInString(key) > wasmabi.MaxKeyChars || len(raw) == 0 || raw[0] != '{' {
				t.Fatalf("bad element %d: key %q raw %q", i, key, raw)
			}
			return nil
		})
	})
}
