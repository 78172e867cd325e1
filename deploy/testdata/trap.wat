;; trap.wat — a well-formed v1 module whose handler traps on every batch (the smoke run's
;; failure).
(module
  (memory (export "memory") 2)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 65536))
  (func (export "projhost_handle") (param i32 i32) (result i64) unreachable))
