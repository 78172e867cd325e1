package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

// openInput opens the events input of `journal append` and `kinesis put`: the file args[0], or
// the command's stdin for none or "-". name is for messages; close is never nil.
func openInput(cmd *cobra.Command, args []string) (in io.Reader, name string, close func() error, err error) {
	if len(args) == 0 || args[0] == "-" {
		return cmd.InOrStdin(), "stdin", func() error { return nil }, nil
	}
	f, err := os.Open(args[0])
	if err != nil {
		return nil, "", nil, err
	}
	return f, args[0], f.Close, nil
}
