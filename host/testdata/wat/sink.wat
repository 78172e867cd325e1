;; sink.wat — a valid ABI v1 handler that ignores its batch and returns no mutations; the
;; benchmarks use it to measure the host's own cost per batch (encode, alloc, call).
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
    (i64.const 0)))
