// The functions the host calls (ABI.md §1), for a handler's entry file to export:
//
//   export * from "@projhost/sdk/exports";
//
// Without them the host refuses the module ("missing export projhost_abi_v1").
export { projhost_abi_v1, projhost_alloc, projhost_handle } from "./index";
