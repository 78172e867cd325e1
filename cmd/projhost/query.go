package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

func init() {
	var sf storeFlags
	var name, coll, key string
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Print read-model documents as JSON lines {collection, key, doc}, ordered by key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || coll == "" {
				return fmt.Errorf("--name and --collection are required")
			}
			ctx := cmd.Context()
			st, err := sf.openReadOnly(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			enc := json.NewEncoder(cmd.OutOrStdout())
			type line struct {
				Collection string          `json:"collection"`
				Key        string          `json:"key"`
				Doc        json.RawMessage `json:"doc"`
			}
			if cmd.Flags().Changed("key") {
				if key == "" {
					return fmt.Errorf("--key must not be empty (omit it to list the whole collection)")
				}
				doc, ok, err := st.ReadModel.Get(ctx, name, coll, key)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("no document %s/%s in projection %q", coll, key, name)
				}
				return enc.Encode(line{coll, key, doc})
			}
			docs, err := st.ReadModel.Scan(ctx, name, coll)
			if err != nil {
				return err
			}
			for _, d := range docs {
				if err := enc.Encode(line{d.Collection, d.Key, d.Doc}); err != nil {
					return err
				}
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "projection name")
	cmd.Flags().StringVar(&coll, "collection", "", "collection")
	cmd.Flags().StringVar(&key, "key", "", "one document's key (default: every document of the collection)")
	rootCmd.AddCommand(cmd)
}
