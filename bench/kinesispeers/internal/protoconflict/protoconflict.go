// Package protoconflict lets the two peers live in one binary. vmware-go-kcl-v2 links
// github.com/awslabs/kinesis-aggregation/go/v2 and harlow/kinesis-consumer links its v1, and
// both register the protobuf message AggregatedRecord under one name, which panics at start-up
// ("proto: message AggregatedRecord is already registered"). The protobuf runtime reads
// GOLANG_PROTOBUF_REGISTRATION_CONFLICT when the conflict happens
// (google.golang.org/protobuf/reflect/protoregistry; see
// https://protobuf.dev/reference/go/faq#namespace-conflict): this package sets it to "ignore"
// (the second registration is dropped; neither peer looks messages up by name, and the records
// of the benchmark are not KPL-aggregated) unless it is set already.
//
// It must be initialized before the two aggregation packages. Go initializes packages in the
// order of their import paths among those whose imports are ready (The Go Programming Language
// Specification, "Package initialization", since Go 1.21), and this one imports only os, so its
// module path, aaa.kbench/protoconflict, sorts before github.com/... on purpose. It is a module of its own
// (replaced to this directory in ../../go.mod) for that path.
package protoconflict

import "os"

func init() {
	if os.Getenv("GOLANG_PROTOBUF_REGISTRATION_CONFLICT") == "" {
		os.Setenv("GOLANG_PROTOBUF_REGISTRATION_CONFLICT", "ignore")
	}
}
