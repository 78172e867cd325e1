;; tablebomb.wat — a handler that grows its table, declared without a maximum, towards 2^32
;; entries (issue 8: a table is Go heap outside the memory limit). The host caps every table at
;; wasmbounds.MaxTableEntries (1,048,576): growing to exactly that succeeds, one entry more must
;; fail (-1). The call returns an empty output when it did, and traps when the host let the
;; table grow past the cap.
(module
  (memory (export "memory") 2)
  (table $t 1 funcref)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param $size i32) (result i32)
    (if (i32.gt_u (local.get $size) (i32.const 65536)) (then unreachable))
    (i32.const 65536))
  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64)
    (if (i32.eq (table.grow $t (ref.null func) (i32.const 1048575)) (i32.const -1)) (then unreachable))
    (if (i32.ne (table.grow $t (ref.null func) (i32.const 1)) (i32.const -1)) (then unreachable))
    (if (i32.ne (table.grow $t (ref.null func) (i32.const 0x7fffffff)) (i32.const -1)) (then unreachable))
    (i64.const 0)))
