//go:build lenient

package main

import "github.com/projhost/projhost/plugins/examples/flightdelays"

// The lenient build accepts numbers given as JSON strings (flightdelays.AcceptQuotedNumbers).
func init() { flightdelays.AcceptQuotedNumbers = true }
