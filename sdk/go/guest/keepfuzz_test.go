//go:build !wasip1

package guest_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/projhost/projhost/sdk/go/guest"
)

// fzA is a document of the first State of collection c: {"v":N} plus {"p":"xxx..."} when Pad > 0
// (Pad 300000 makes an encoding over the 256 KiB limit).
type fzA struct {
	V   int64
	Pad int64
}

func (d *fzA) Decode(doc []byte) error {
	var ok bool
	if d.V, ok = guest.JSONInt(doc, "v"); !ok {
		return errors.New(`no integer "v"`)
	}
	if p, ok := guest.JSONString(doc, "p"); ok {
		d.Pad = int64(len(p))
	}
	return nil
}

func (d *fzA) Append(dst []byte) []byte {
	o := guest.NewObject(dst)
	o.Int("v", d.V)
	if d.Pad > 0 {
		o.Str("p", strings.Repeat("x", int(d.Pad)))
	}
	return o.Bytes()
}

// fzB is a document of the second State of collection c: {"v":N,"w":"..."}.
type fzB struct {
	V int64
	W string
}

func (d *fzB) Decode(doc []byte) error {
	var ok bool
	if d.V, ok = guest.JSONInt(doc, "v"); !ok {
		return errors.New(`no integer "v"`)
	}
	if w, ok := guest.JSONString(doc, "w"); ok {
		d.W = string(w)
	}
	return nil
}

func (d *fzB) Append(dst []byte) []byte {
	o := guest.NewObject(dst)
	o.Int("v", d.V).Str("w", d.W)
	return o.Bytes()
}

// TestStateKeepingRandomMatchesDecodeEveryBatch runs random batches mixing two States of one
// collection, Batch.Put/Read/Delete, external writes (including rewrites of the same bytes),
// failing, misusing, too-large and panicking batches, keeping and decoding every batch, in the
// three read modes, and compares everything the handlers saw and wrote.
func TestStateKeepingRandomMatchesDecodeEveryBatch(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 99))
		type step struct {
			ext  map[string]string // "" deletes; "=" rewrites the stored bytes as they are
			cmds []string
		}
		var steps []step
		nk := 3 + rng.IntN(10)
		key := func() string {
			if rng.IntN(8) == 0 {
				return "ké" + strconv.Itoa(rng.IntN(nk))
			}
			return "k" + strconv.Itoa(rng.IntN(nk))
		}
		for range 150 {
			var st step
			if rng.IntN(4) == 0 {
				st.ext = map[string]string{}
				for range 1 + rng.IntN(3) {
					switch rng.IntN(4) {
					case 0:
						st.ext[key()] = ""
					case 1:
						st.ext[key()] = "="
					case 2:
						st.ext[key()] = fmt.Sprintf(`{"v":%d}`, rng.IntN(9))
					default:
						st.ext[key()] = fmt.Sprintf(`{"w":"e","v":%d}`, rng.IntN(9))
					}
				}
			}
			for range 1 + rng.IntN(10) {
				k := key()
				var c string
				switch r := rng.IntN(100); {
				case r < 45:
					c = "a " + k + " " + strconv.Itoa(1+rng.IntN(3))
				case r < 55:
					c = "b " + k
				case r < 63:
					c = "put " + k + " " + strconv.Itoa(rng.IntN(9))
				case r < 68:
					c = "putsame " + k
				case r < 78:
					c = "read " + k
				case r < 86:
					c = "del " + k
				case r < 89:
					c = "err"
				case r < 91:
					c = "badkey"
				case r < 93:
					c = "big " + k
				case r < 94:
					c = "panic"
				default:
					c = "a " + k + " 0"
				}
				st.cmds = append(st.cmds, c)
			}
			steps = append(steps, st)
		}
		for _, mode := range []string{"own", "read", "known"} {
			keep := fzRun(t, mode, false, steps2(steps, func(s step) (map[string]string, []string) { return s.ext, s.cmds }))
			every := fzRun(t, mode, true, steps2(steps, func(s step) (map[string]string, []string) { return s.ext, s.cmds }))
			for i := range keep {
				if keep[i] != every[i] {
					t.Fatalf("seed %d mode %s step %d (%q ext %q):\nkeeping:\n%s\ndecodeEveryBatch:\n%s", seed, mode, i, steps[i].cmds, steps[i].ext, keep[i], every[i])
				}
			}
		}
	}
}

type fzStep struct {
	ext  map[string]string
	cmds []string
}

func steps2[S any](ss []S, f func(S) (map[string]string, []string)) []fzStep {
	out := make([]fzStep, len(ss))
	for i, s := range ss {
		out[i].ext, out[i].cmds = f(s)
	}
	return out
}

// fzRun returns, per step, what the batch saw and wrote, then the read model after it.
func fzRun(t *testing.T, mode string, every bool, steps []fzStep) []string {
	t.Helper()
	as := guest.NewState("c", (*fzA).Decode, (*fzA).Append)
	bs := guest.NewState("c", (*fzB).Decode, (*fzB).Append)
	if every {
		as.DecodeEveryBatch()
		bs.DecodeEveryBatch()
	}
	var log []string
	h := func(b *guest.Batch) error {
		for b.Next() {
			f := strings.Fields(string(b.Event().Data))
			switch f[0] {
			case "a":
				d, found := as.GetString(b, f[1])
				n, _ := strconv.Atoi(f[2])
				log = append(log, fmt.Sprintf("a %s %d/%d %v", f[1], d.V, d.Pad, found))
				d.V += int64(n)
			case "b":
				d, found := bs.GetString(b, f[1])
				log = append(log, fmt.Sprintf("b %s %d/%q %v", f[1], d.V, d.W, found))
				d.V++
				d.W += "x"
			case "put":
				b.Put("c", []byte(f[1]), []byte(`{"v":`+f[2]+`}`))
			case "putsame":
				if d, ok := b.Read("c", []byte(f[1])); ok {
					b.Put("c", []byte(f[1]), append([]byte(nil), d...))
				}
			case "read":
				d, ok := b.Read("c", []byte(f[1]))
				log = append(log, fmt.Sprintf("read %s %s %v", f[1], d, ok))
			case "del":
				b.Delete("c", []byte(f[1]))
			case "err":
				return errors.New("on purpose")
			case "badkey":
				b.Put("c", nil, []byte(`{}`))
			case "big":
				d, _ := as.GetString(b, f[1])
				d.Pad = 300000
			case "panic":
				panic("on purpose")
			}
		}
		return nil
	}
	n := guest.NewNative(h)
	store := map[string]string{}
	imp := storeImports(store, mode == "known")
	get := func(k string) (string, bool) {
		if mode == "own" {
			d, ok := n.Get("c", k)
			return string(d), ok
		}
		d, ok := store["c/"+k]
		return d, ok
	}
	set := func(k, d string) {
		if mode == "own" {
			if d == "" {
				// no Delete on Native: write through a batch of another Native? use Set of "{}" instead
				n.Set("c", k, []byte(`{"v":0,"gone":true}`))
				return
			}
			n.Set("c", k, []byte(d))
			return
		}
		if d == "" {
			delete(store, "c/"+k)
		} else {
			store["c/"+k] = d
		}
	}
	runBatch := func(evs []guest.Event) (out string) {
		defer func() {
			if p := recover(); p != nil {
				out = fmt.Sprint("panic: ", p)
			}
		}()
		if mode == "own" {
			ms, err := n.Run("s", evs)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprint(muts(ms))
		}
		return runBatchApply(t, n, evs, imp, store)
	}
	var outs []string
	seq := 0
	for _, st := range steps {
		for _, k := range slices.Sorted(maps.Keys(st.ext)) {
			d := st.ext[k]
			if d == "=" {
				if cur, ok := get(k); ok {
					set(k, string([]byte(cur)))
				}
				continue
			}
			set(k, d)
		}
		var evs []guest.Event
		for _, c := range st.cmds {
			seq++
			evs = append(evs, guest.Event{Seq: []byte(strconv.Itoa(seq)), PartitionKey: []byte("p"), Data: []byte(c)})
		}
		log = log[:0]
		out := runBatch(evs)
		var keys []string
		if mode == "own" {
			keys = slices.Sorted(maps.Keys(n.Collection("c")))
		} else {
			for k := range store {
				keys = append(keys, strings.TrimPrefix(k, "c/"))
			}
			slices.Sort(keys)
		}
		var sb strings.Builder
		for _, k := range keys {
			d, _ := get(k)
			fmt.Fprintf(&sb, " %s=%s", k, d)
		}
		outs = append(outs, out+"\n"+strings.Join(log, "\n")+"\nstore:"+sb.String())
	}
	return outs
}
