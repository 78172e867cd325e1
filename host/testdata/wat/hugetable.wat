;; hugetable.wat — a handler declaring a table of 2,000,000 entries, more than the host's
;; wasmbounds.MaxTableEntries: Load refuses it.
(module
  (memory (export "memory") 1)
  (table 2000000 funcref)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param $size i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64) (i64.const 0)))
