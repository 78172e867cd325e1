;; bomb.wat — the hostile handlers of issue 8, chosen by the first byte of the batch's first
;; event's data (of its first field name when the data is a JSON object: {"T":1}). Memory bombs grow the memory by 16 pages (1 MiB) at a time until memory.grow
;; fails, then return no mutations (the instance keeps its memory) or trap: "k" keep, "x" trap
;; (the pages stay untouched: address space only), "t" keep and "T" trap after writing every new
;; page (so that the pages become resident). "L" loops for ever. Any other byte: no mutations at
;; once (a healthy shard). Batch layout (wasmabi/ABI.md §2): shard id length at 12, shard id at
;; 14, then the first event: seq length u16, seq, key length u16, key, i64 arrival, u32 data
;; length, data.
(module
  (memory (export "memory") 2)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param $size i32) (result i32)
    (local $need i32)
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $size) (i32.const 131071)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1)) (then unreachable))))
    (i32.const 65536))
  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64)
    (local $s i32) (local $q i32) (local $data i32) (local $mode i32) (local $old i32)
    (local.set $s (i32.load16_u offset=12 (local.get $p)))
    ;; first event: skip seq and key, the arrival time and the data length
    (local.set $q (i32.add (i32.add (local.get $p) (i32.const 14)) (local.get $s)))
    (local.set $q (i32.add (i32.add (local.get $q) (i32.const 2)) (i32.load16_u (local.get $q))))
    (local.set $q (i32.add (i32.add (local.get $q) (i32.const 2)) (i32.load16_u (local.get $q))))
    (local.set $data (i32.add (local.get $q) (i32.const 12)))
    (local.set $mode (i32.load8_u (local.get $data)))
    (if (i32.eq (local.get $mode) (i32.const 123)) ;; "{": a JSON event {"M":...} names the mode M
      (then (local.set $mode (i32.load8_u offset=2 (local.get $data)))))
    (if (i32.eq (local.get $mode) (i32.const 76)) (then (loop $spin (br $spin)))) ;; "L"
    (if (i32.eqz (i32.or (i32.eq (i32.or (local.get $mode) (i32.const 32)) (i32.const 116))
                 (i32.or (i32.eq (local.get $mode) (i32.const 107)) (i32.eq (local.get $mode) (i32.const 120)))))
      (then (return (i64.const 0)))) ;; not t, T, k or x: healthy
    (block $full
      (loop $grow
        (local.set $old (memory.grow (i32.const 16)))
        (br_if $full (i32.eq (local.get $old) (i32.const -1)))
        (if (i32.eq (i32.or (local.get $mode) (i32.const 32)) (i32.const 116)) ;; "t" or "T": touch the new MiB
          (then (memory.fill (i32.shl (local.get $old) (i32.const 16)) (i32.const 1) (i32.const 1048576))))
        (br $grow)))
    (if (i32.or (i32.eq (local.get $mode) (i32.const 120)) (i32.eq (local.get $mode) (i32.const 84))) ;; "x" or "T"
      (then unreachable))
    (i64.const 0)))
