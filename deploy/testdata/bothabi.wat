;; bothabi.wat — a module that exports the markers of ABI v1 and of v2.
(module
  (memory (export "memory") 1)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_abi_v2"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))
