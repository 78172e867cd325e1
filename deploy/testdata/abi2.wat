;; abi2.wat — a module that declares a later ABI (projhost_abi_v2) than the host speaks.
(module
  (memory (export "memory") 1)
  (func (export "projhost_abi_v2"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))
