;; noop.wat — a projhost handler that writes nothing: every batch gets the empty output (ABI.md
;; §4: out_len 0 means no mutations). bench/kinesispeers runs it beside count-go.wasm to show what
;; the host costs without a read model (the peers' handlers keep none). Built by
;; `make build/wasm/noop.wasm` (host/testdata/wat2wasm.js).
(module
  (memory (export "memory") 2)
  (func (export "projhost_abi_v1"))
  ;; the batch at 1024, the memory grown to hold it
  (func (export "projhost_alloc") (param $size i32) (result i32)
    (local $need i32)
    (local.set $need (i32.sub (i32.shr_u (i32.add (i32.add (local.get $size) (i32.const 1024)) (i32.const 65535)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1)) (then unreachable))))
    (i32.const 1024))
  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64)
    (i64.const 0)))
