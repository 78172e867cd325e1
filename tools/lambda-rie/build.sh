#!/usr/bin/env bash
# build.sh OUT: builds the AWS Lambda Runtime Interface Emulator (aws-lambda-rie, the version
# pinned in this folder's go.mod, from the Go module proxy) into the file OUT, for the host.
# internal/esm's tests call it (once per machine: they keep the binary under the OS temp dir).
set -euo pipefail
out="$(realpath -m "$1")"
cd "$(dirname "${BASH_SOURCE[0]}")"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$out" github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
