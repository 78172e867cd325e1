package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/store/dynamo"
)

func init() {
	tc := &cobra.Command{Use: "tables", Short: "Manage the DynamoDB tables of --store dynamodb"}
	var sf storeFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Create the lease, cursor, read-model, dead-letter and module-registry tables (on-demand billing); existing tables are kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := dynamo.CreateTables(ctx, sf.dynamoConfig()); err != nil {
				return err
			}
			n, err := dynamotables.NamesFor(sf.prefix)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tables ready: %s %s %s %s %s\n", n.Leases, n.Cursors, n.ReadModel, n.DeadLetters, n.Modules)
			return nil
		},
	}
	create.Flags().StringVar(&sf.endpoint, "dynamodb-endpoint", "", "DynamoDB endpoint URL (default: the AWS default chain)")
	create.Flags().StringVar(&sf.prefix, "table-prefix", dynamotables.DefaultPrefix, "prefix of the table names")
	create.Flags().StringVar(&sf.region, "region", "", "AWS region (default: from the AWS config; us-east-1 with a local endpoint)")
	tc.AddCommand(create)
	rootCmd.AddCommand(tc)
}
