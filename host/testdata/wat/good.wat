;; good.wat — a valid ABI v1 handler written by hand, used by the host tests and benchmarks.
;; For every event it (1) reads events/<partition key>; when found, puts the document read into
;; prev/<partition key> (exercising projhost.read and its n > buf_cap retry: the first read offers
;; an 8-byte buffer); then (2) puts the event data into events/<partition key>. It logs one info
;; line per batch. Memory layout: constants below 64 KiB, the input buffer at 64 KiB, the output
;; right after the input.
(module
  (import "projhost" "read" (func $read (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "projhost" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "events")
  (data (i32.const 32) "prev")
  (data (i32.const 48) "good: batch")
  (global $in i32 (i32.const 65536))
  (global $out (mut i32) (i32.const 0))
  (global $outStart (mut i32) (i32.const 0))

  (func (export "projhost_abi_v1"))

  ;; ensure grows memory so that [0, end) is addressable, trapping when it cannot.
  (func $ensure (param $end i32)
    (local $need i32)
    (local.set $need
      (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1)) (then unreachable)))))

  (func (export "projhost_alloc") (param $size i32) (result i32)
    (call $ensure (i32.add (global.get $in) (local.get $size)))
    (global.get $in))

  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64)
    (local $n i32) (local $i i32) (local $count i32)
    (local $pk i32) (local $pklen i32) (local $data i32) (local $dlen i32)
    (local $hdr i32) (local $r i32)
    (call $log (i32.const 1) (i32.const 48) (i32.const 11))
    (global.set $outStart
      (i32.and (i32.add (i32.add (local.get $p) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (global.set $out (i32.add (global.get $outStart) (i32.const 8)))
    (call $ensure (global.get $out))
    (local.set $n (i32.load offset=8 (local.get $p)))
    (local.set $i (i32.add (i32.add (local.get $p) (i32.const 14)) (i32.load16_u offset=12 (local.get $p))))
    (block $done
      (loop $ev
        (br_if $done (i32.eqz (local.get $n)))
        ;; sequence number: skip
        (local.set $i (i32.add (i32.add (local.get $i) (i32.const 2)) (i32.load16_u (local.get $i))))
        ;; partition key
        (local.set $pklen (i32.load16_u (local.get $i)))
        (local.set $pk (i32.add (local.get $i) (i32.const 2)))
        (local.set $i (i32.add (local.get $pk) (local.get $pklen)))
        ;; arrival time (8 bytes), data length, data
        (local.set $dlen (i32.load offset=8 (local.get $i)))
        (local.set $data (i32.add (local.get $i) (i32.const 12)))
        (local.set $i (i32.add (local.get $data) (local.get $dlen)))

        ;; (1) put prev/<pk> = read(events/<pk>) when found
        (local.set $hdr (global.get $out))
        (call $ensure (i32.add (global.get $out) (i32.add (local.get $pklen) (i32.const 64))))
        (i32.store8 (global.get $out) (i32.const 1))
        (i32.store16 offset=1 (global.get $out) (i32.const 4))
        (memory.copy (i32.add (global.get $out) (i32.const 3)) (i32.const 32) (i32.const 4))
        (global.set $out (i32.add (global.get $out) (i32.const 7)))
        (i32.store16 (global.get $out) (local.get $pklen))
        (memory.copy (i32.add (global.get $out) (i32.const 2)) (local.get $pk) (local.get $pklen))
        (global.set $out (i32.add (global.get $out) (i32.add (i32.const 2) (local.get $pklen))))
        (local.set $r (call $read (i32.const 16) (i32.const 6) (local.get $pk) (local.get $pklen)
                                 (i32.add (global.get $out) (i32.const 4)) (i32.const 8)))
        (if (i32.gt_s (local.get $r) (i32.const 8))
          (then
            (call $ensure (i32.add (global.get $out) (i32.add (local.get $r) (i32.const 4))))
            (local.set $r (call $read (i32.const 16) (i32.const 6) (local.get $pk) (local.get $pklen)
                                     (i32.add (global.get $out) (i32.const 4)) (local.get $r)))))
        (if (i32.lt_s (local.get $r) (i32.const 0))
          (then (global.set $out (local.get $hdr)))
          (else
            (i32.store (global.get $out) (local.get $r))
            (global.set $out (i32.add (global.get $out) (i32.add (i32.const 4) (local.get $r))))
            (local.set $count (i32.add (local.get $count) (i32.const 1)))))

        ;; (2) put events/<pk> = data
        (call $ensure (i32.add (global.get $out)
                               (i32.add (i32.add (local.get $pklen) (local.get $dlen)) (i32.const 32))))
        (i32.store8 (global.get $out) (i32.const 1))
        (i32.store16 offset=1 (global.get $out) (i32.const 6))
        (memory.copy (i32.add (global.get $out) (i32.const 3)) (i32.const 16) (i32.const 6))
        (global.set $out (i32.add (global.get $out) (i32.const 9)))
        (i32.store16 (global.get $out) (local.get $pklen))
        (memory.copy (i32.add (global.get $out) (i32.const 2)) (local.get $pk) (local.get $pklen))
        (global.set $out (i32.add (global.get $out) (i32.add (i32.const 2) (local.get $pklen))))
        (i32.store (global.get $out) (local.get $dlen))
        (memory.copy (i32.add (global.get $out) (i32.const 4)) (local.get $data) (local.get $dlen))
        (global.set $out (i32.add (global.get $out) (i32.add (i32.const 4) (local.get $dlen))))
        (local.set $count (i32.add (local.get $count) (i32.const 1)))

        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $ev)))
    (i32.store (global.get $outStart) (i32.const 1))
    (i32.store offset=4 (global.get $outStart) (local.get $count))
    (i64.or (i64.shl (i64.extend_i32_u (global.get $outStart)) (i64.const 32))
            (i64.extend_i32_u (i32.sub (global.get $out) (global.get $outStart))))))
