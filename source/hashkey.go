package source

import (
	"crypto/md5"
	"encoding/binary"
	"math/big"
	"math/bits"
)

// Hash keys (Amazon Kinesis Data Streams, "Partition key" in the developer guide): a record's
// partition key is hashed with MD5 over its UTF-8 bytes, and the 16-byte digest read as a
// big-endian unsigned 128-bit integer is its hash key. Each shard owns an inclusive range of hash
// keys; the ranges of a stream's open shards cover [0, 2^128-1] without gaps.
//
// A stream created with n shards splits the range evenly: shard i covers
// [floor(i*2^128/n), floor((i+1)*2^128/n) - 1], and the last shard ends at 2^128-1. The local
// journal uses the same rule (DESIGN §5), so a key lands on the same shard number in both sources.

// maxHashKey is 2^128 - 1.
var maxHashKey = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// HashKey returns the 128-bit hash key of a partition key: MD5 of its bytes, big-endian.
func HashKey(partitionKey string) *big.Int {
	sum := md5.Sum([]byte(partitionKey))
	return new(big.Int).SetBytes(sum[:])
}

// EvenHashKeyRange returns the inclusive hash key range of shard i of n evenly split shards, as
// decimal strings (the form Shard.HashKeyStart/End use). It panics unless 0 <= i < n.
func EvenHashKeyRange(i, n int) (start, end string) {
	if n <= 0 || i < 0 || i >= n {
		panic("source: EvenHashKeyRange: shard index out of range")
	}
	s := evenStart(i, n)
	e := maxHashKey
	if i < n-1 {
		e = new(big.Int).Sub(evenStart(i+1, n), big.NewInt(1))
	}
	return s.String(), e.String()
}

// evenStart returns floor(i*2^128/n).
func evenStart(i, n int) *big.Int {
	v := new(big.Int).Lsh(big.NewInt(int64(i)), 128)
	return v.Quo(v, big.NewInt(int64(n)))
}

// EvenShardForKey returns the index of the shard, among n evenly split shards, whose hash key range
// holds partitionKey's hash key. It does not allocate. It panics unless n > 0.
func EvenShardForKey(partitionKey string, n int) int {
	sum := md5.Sum([]byte(partitionKey))
	return EvenShardForHash(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:]), n)
}

// EvenShardForHash returns the index of the shard, among n evenly split shards, holding the hash
// key hi*2^64 + lo. It panics unless n > 0.
//
// Shard i holds h when floor(i*2^128/n) <= h, i.e. i*2^128 < n*(h+1); the largest such i is
// floor((n*(h+1) - 1) / 2^128).
func EvenShardForHash(hi, lo uint64, n int) int {
	if n <= 0 {
		panic("source: EvenShardForHash: shard count must be positive")
	}
	if hi == ^uint64(0) && lo == ^uint64(0) {
		return n - 1 // h+1 = 2^128
	}
	lo1, carry := bits.Add64(lo, 1, 0)
	hi1 := hi + carry // no overflow: h < 2^128-1
	// n * (hi1*2^64 + lo1) as a 192-bit number (p2, p1, p0).
	nn := uint64(n)
	c0, p0 := bits.Mul64(nn, lo1)
	c1, m1 := bits.Mul64(nn, hi1)
	p1, carry := bits.Add64(m1, c0, 0)
	p2 := c1 + carry
	// Subtract 1.
	_, borrow := bits.Sub64(p0, 1, 0)
	_, borrow = bits.Sub64(p1, 0, borrow)
	p2 -= borrow
	return int(p2)
}
