;; hostile.wat — the handler of the hostile suite (hostile.go). ABI v1 (wasmabi/ABI.md), written
;; by hand so that each misbehaviour is exactly what it says.
;;
;; Healthy behaviour, for every event: put events/<shard id>/<seq> = the event's data (a JSON
;; object), so the read model says exactly which events were handled and with what.
;;
;; An event whose data starts with {"hostile":" misbehaves according to the next byte:
;;   k  memory bomb, keep: memory.grow 16 pages in a loop until it fails (writing every 4 KiB
;;      of them, so they are resident), then handle the event
;;      normally (the instance keeps all that memory);
;;   t  memory bomb, trap: the same growth, then trap (unreachable);
;;   l  runaway loop: loop for ever;
;;   m  huge output: 1,000,000 puts m/<7 digits> = {} (19 bytes each), then the event's own put;
;;   f  log flood: 200,000 projhost.log calls (info, 1000 bytes each), then the event's own put.
;; Any other byte: healthy. The DynamoDB-hostile documents need no marker: they are events whose
;; data is the document, put as it is.
;;
;; Memory: constants below 64 KiB (the flood's line at 1024..2024), the input buffer at 64 KiB,
;; the output right after the input.
(module
  (import "projhost" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "events")
  (data (i32.const 32) "{\"hostile\":\"")
  (data (i32.const 64) "m")
  (data (i32.const 72) "{}")
  (global $in i32 (i32.const 65536))
  (global $out (mut i32) (i32.const 0))
  (global $outStart (mut i32) (i32.const 0))
  (global $count (mut i32) (i32.const 0))

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

  ;; mode returns the byte after the marker {"hostile":" when data starts with it, else 0.
  (func $mode (param $d i32) (param $n i32) (result i32)
    (local $i i32)
    (if (i32.lt_u (local.get $n) (i32.const 13)) (then (return (i32.const 0))))
    (block $no
      (loop $c
        (br_if $no (i32.ne (i32.load8_u (i32.add (local.get $d) (local.get $i)))
                           (i32.load8_u (i32.add (i32.const 32) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $c (i32.lt_u (local.get $i) (i32.const 12))))
      (return (i32.load8_u offset=12 (local.get $d))))
    (i32.const 0))

  ;; bytes appends n bytes from src to the output.
  (func $bytes (param $src i32) (param $n i32)
    (memory.copy (global.get $out) (local.get $src) (local.get $n))
    (global.set $out (i32.add (global.get $out) (local.get $n))))

  ;; u16 appends a u16 to the output.
  (func $u16 (param $v i32)
    (i32.store16 (global.get $out) (local.get $v))
    (global.set $out (i32.add (global.get $out) (i32.const 2))))

  ;; u32 appends a u32 to the output.
  (func $u32 (param $v i32)
    (i32.store (global.get $out) (local.get $v))
    (global.set $out (i32.add (global.get $out) (i32.const 4))))

  ;; bomb grows memory 16 pages (1 MiB) at a time until memory.grow fails, writing a byte to
  ;; every 4 KiB of each new MiB so that all of it becomes resident in the host.
  (func $bomb
    (local $old i32) (local $a i32) (local $end i32)
    (loop $g
      (local.set $old (memory.grow (i32.const 16)))
      (if (i32.ne (local.get $old) (i32.const -1))
        (then
          (local.set $a (i32.shl (local.get $old) (i32.const 16)))
          (local.set $end (i32.add (local.get $a) (i32.const 1048576)))
          (loop $w
            (i32.store8 (local.get $a) (i32.const 1))
            (local.set $a (i32.add (local.get $a) (i32.const 4096)))
            (br_if $w (i32.lt_u (local.get $a) (local.get $end))))
          (br $g)))))

  ;; million appends 1,000,000 puts m/<7 digits> = {}.
  (func $million
    (local $j i32) (local $v i32) (local $k i32)
    (call $ensure (i32.add (global.get $out) (i32.const 19000064)))
    (loop $put
      (i32.store8 (global.get $out) (i32.const 1))
      (global.set $out (i32.add (global.get $out) (i32.const 1)))
      (call $u16 (i32.const 1))
      (call $bytes (i32.const 64) (i32.const 1))
      (call $u16 (i32.const 7))
      (local.set $v (local.get $j))
      (local.set $k (i32.const 6))
      (loop $digit
        (i32.store8 (i32.add (global.get $out) (local.get $k))
                    (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
        (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
        (local.set $k (i32.sub (local.get $k) (i32.const 1)))
        (br_if $digit (i32.ge_s (local.get $k) (i32.const 0))))
      (global.set $out (i32.add (global.get $out) (i32.const 7)))
      (call $u32 (i32.const 2))
      (call $bytes (i32.const 72) (i32.const 2))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br_if $put (i32.lt_u (local.get $j) (i32.const 1000000))))
    (global.set $count (i32.add (global.get $count) (i32.const 1000000))))

  ;; flood makes 200,000 projhost.log calls of 1000 bytes at info level.
  (func $flood
    (local $j i32)
    (memory.fill (i32.const 1024) (i32.const 102) (i32.const 1000))
    (loop $l
      (call $log (i32.const 1) (i32.const 1024) (i32.const 1000))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $j) (i32.const 200000)))))

  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64)
    (local $n i32) (local $i i32) (local $sid i32) (local $slen i32)
    (local $seq i32) (local $qlen i32) (local $data i32) (local $dlen i32) (local $mode i32)
    (global.set $count (i32.const 0))
    (global.set $outStart
      (i32.and (i32.add (i32.add (local.get $p) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (global.set $out (i32.add (global.get $outStart) (i32.const 8)))
    (call $ensure (global.get $out))
    (local.set $n (i32.load offset=8 (local.get $p)))
    (local.set $slen (i32.load16_u offset=12 (local.get $p)))
    (local.set $sid (i32.add (local.get $p) (i32.const 14)))
    (local.set $i (i32.add (local.get $sid) (local.get $slen)))
    (block $done
      (loop $ev
        (br_if $done (i32.eqz (local.get $n)))
        ;; sequence number
        (local.set $qlen (i32.load16_u (local.get $i)))
        (local.set $seq (i32.add (local.get $i) (i32.const 2)))
        (local.set $i (i32.add (local.get $seq) (local.get $qlen)))
        ;; partition key: skip
        (local.set $i (i32.add (i32.add (local.get $i) (i32.const 2)) (i32.load16_u (local.get $i))))
        ;; arrival time (8 bytes), data length, data
        (local.set $dlen (i32.load offset=8 (local.get $i)))
        (local.set $data (i32.add (local.get $i) (i32.const 12)))
        (local.set $i (i32.add (local.get $data) (local.get $dlen)))

        (local.set $mode (call $mode (local.get $data) (local.get $dlen)))
        (if (i32.eq (local.get $mode) (i32.const 107)) (then (call $bomb)))               ;; k
        (if (i32.eq (local.get $mode) (i32.const 116)) (then (call $bomb) unreachable))   ;; t
        (if (i32.eq (local.get $mode) (i32.const 108)) (then (loop $spin (br $spin))))    ;; l
        (if (i32.eq (local.get $mode) (i32.const 109)) (then (call $million)))            ;; m
        (if (i32.eq (local.get $mode) (i32.const 102)) (then (call $flood)))              ;; f

        ;; put events/<shard>/<seq> = data
        (call $ensure (i32.add (global.get $out)
          (i32.add (i32.add (local.get $slen) (local.get $qlen)) (i32.add (local.get $dlen) (i32.const 32)))))
        (i32.store8 (global.get $out) (i32.const 1))
        (global.set $out (i32.add (global.get $out) (i32.const 1)))
        (call $u16 (i32.const 6))
        (call $bytes (i32.const 16) (i32.const 6))
        (call $u16 (i32.add (i32.add (local.get $slen) (local.get $qlen)) (i32.const 1)))
        (call $bytes (local.get $sid) (local.get $slen))
        (i32.store8 (global.get $out) (i32.const 47))
        (global.set $out (i32.add (global.get $out) (i32.const 1)))
        (call $bytes (local.get $seq) (local.get $qlen))
        (call $u32 (local.get $dlen))
        (call $bytes (local.get $data) (local.get $dlen))
        (global.set $count (i32.add (global.get $count) (i32.const 1)))

        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $ev)))
    (i32.store (global.get $outStart) (i32.const 1))
    (i32.store offset=4 (global.get $outStart) (global.get $count))
    (i64.or (i64.shl (i64.extend_i32_u (global.get $outStart)) (i64.const 32))
            (i64.extend_i32_u (i32.sub (global.get $out) (global.get $outStart))))))
