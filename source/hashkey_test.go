package source

import (
	"math/big"
	"testing"
)

func TestEvenShardForKey(t *testing.T) {
	// MD5 digests from RFC 1321 appendix A.5.
	tests := []struct {
		key  string
		md5  string
		n    int
		want int
	}{
		{"", "d41d8cd98f00b204e9800998ecf8427e", 1, 0},
		{"", "d41d8cd98f00b204e9800998ecf8427e", 2, 1},
		{"", "d41d8cd98f00b204e9800998ecf8427e", 3, 2},
		{"", "d41d8cd98f00b204e9800998ecf8427e", 16, 13},
		{"a", "0cc175b9c0f1b6a831c399e269772661", 2, 0},
		{"a", "0cc175b9c0f1b6a831c399e269772661", 16, 0},
		{"a", "0cc175b9c0f1b6a831c399e269772661", 20, 0},  // 0.0498 * 20 = 0.996
		{"a", "0cc175b9c0f1b6a831c399e269772661", 21, 1},  // 0.0498 * 21 = 1.046
		{"abc", "900150983cd24fb0d6963f7d28e17f72", 3, 1}, // 0.5625*3
		{"abc", "900150983cd24fb0d6963f7d28e17f72", 16, 9},
		{"message digest", "f96b697d7cb7938d525a2f31aaf161d0", 16, 15},
		{"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b", 4, 3},
		{"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b", 5, 3},
	}
	for _, tt := range tests {
		h := HashKey(tt.key)
		if got := h.Text(16); got != tt.md5 && "0"+got != tt.md5 {
			t.Errorf("HashKey(%q) = %s, want %s", tt.key, got, tt.md5)
		}
		if got := EvenShardForKey(tt.key, tt.n); got != tt.want {
			t.Errorf("EvenShardForKey(%q, %d) = %d, want %d", tt.key, tt.n, got, tt.want)
		}
		// Cross-check against the ranges.
		s, e := EvenHashKeyRange(tt.want, tt.n)
		start, _ := new(big.Int).SetString(s, 10)
		end, _ := new(big.Int).SetString(e, 10)
		if h.Cmp(start) < 0 || h.Cmp(end) > 0 {
			t.Errorf("hash of %q not in range [%s, %s] of shard %d/%d", tt.key, s, e, tt.want, tt.n)
		}
	}
}

func TestEvenHashKeyRange(t *testing.T) {
	// Values of a 3-shard Kinesis stream (CreateStream ShardCount=3).
	tests := []struct {
		i, n       int
		start, end string
	}{
		{0, 1, "0", "340282366920938463463374607431768211455"},
		{0, 2, "0", "170141183460469231731687303715884105727"},
		{1, 2, "170141183460469231731687303715884105728", "340282366920938463463374607431768211455"},
		{0, 3, "0", "113427455640312821154458202477256070484"},
		{1, 3, "113427455640312821154458202477256070485", "226854911280625642308916404954512140969"},
		{2, 3, "226854911280625642308916404954512140970", "340282366920938463463374607431768211455"},
	}
	for _, tt := range tests {
		s, e := EvenHashKeyRange(tt.i, tt.n)
		if s != tt.start || e != tt.end {
			t.Errorf("EvenHashKeyRange(%d, %d) = [%s, %s], want [%s, %s]", tt.i, tt.n, s, e, tt.start, tt.end)
		}
	}
}

// TestEvenShardForHashBoundaries checks the first and last hash key of every range for several
// shard counts against the big-integer ranges.
func TestEvenShardForHashBoundaries(t *testing.T) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	split := func(v *big.Int) (uint64, uint64) {
		q, r := new(big.Int).QuoRem(v, two64, new(big.Int))
		return q.Uint64(), r.Uint64()
	}
	for _, n := range []int{1, 2, 3, 7, 16, 100, 1000, 4096} {
		for i := 0; i < n; i++ {
			s, e := EvenHashKeyRange(i, n)
			for _, d := range []string{s, e} {
				v, _ := new(big.Int).SetString(d, 10)
				hi, lo := split(v)
				if got := EvenShardForHash(hi, lo, n); got != i {
					t.Fatalf("n=%d: hash %s -> shard %d, want %d", n, d, got, i)
				}
			}
		}
	}
}

func FuzzEvenShardForKey(f *testing.F) {
	for _, k := range []string{"", "a", "DTW", "LAS", "\xff\x00"} {
		f.Add(k, 16)
	}
	f.Fuzz(func(t *testing.T, key string, n int) {
		if n <= 0 || n > 100000 {
			return
		}
		i := EvenShardForKey(key, n)
		s, e := EvenHashKeyRange(i, n)
		start, _ := new(big.Int).SetString(s, 10)
		end, _ := new(big.Int).SetString(e, 10)
		h := HashKey(key)
		if h.Cmp(start) < 0 || h.Cmp(end) > 0 {
			t.Fatalf("key %q -> shard %d/%d whose range [%s, %s] does not hold %s", key, i, n, s, e, h)
		}
	})
}
