package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	cursordynamo "github.com/projhost/projhost/cursorstore/dynamo"
	"github.com/projhost/projhost/internal/dynamotables"
	rmdynamo "github.com/projhost/projhost/readmodel/dynamo"
	leasedynamo "github.com/projhost/projhost/shardmap/dynamo"
)

func (f *storeFlags) clientOptions() []dynamotables.ClientOption {
	var opts []dynamotables.ClientOption
	if f.endpoint != "" {
		opts = append(opts, dynamotables.WithEndpoint(f.endpoint))
	}
	if f.region != "" {
		opts = append(opts, dynamotables.WithRegion(f.region))
	}
	return opts
}

// openDynamo opens the DynamoDB lease, cursor and read-model stores of --table-prefix.
func openDynamo(ctx context.Context, f *storeFlags) (*stores, error) {
	c, err := dynamotables.NewClient(ctx, f.clientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB client: %w", err)
	}
	leases, err := leasedynamo.New(c, f.prefix)
	if err != nil {
		return nil, err
	}
	cursors, err := cursordynamo.New(c, f.prefix)
	if err != nil {
		return nil, err
	}
	rm, err := rmdynamo.New(c, f.prefix)
	if err != nil {
		return nil, err
	}
	return &stores{Leases: leases, Cursors: cursors, ReadModel: rm}, nil
}

func init() {
	tc := &cobra.Command{Use: "tables", Short: "Manage the DynamoDB tables of --store dynamodb"}
	var sf storeFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Create the lease, cursor, read-model and dead-letter tables (on-demand billing); existing tables are kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := dynamotables.NewClient(ctx, sf.clientOptions()...)
			if err != nil {
				return fmt.Errorf("DynamoDB client: %w", err)
			}
			if err := dynamotables.CreateTables(ctx, c, sf.prefix); err != nil {
				return err
			}
			n, err := dynamotables.NamesFor(sf.prefix)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tables ready: %s %s %s %s\n", n.Leases, n.Cursors, n.ReadModel, n.DeadLetters)
			return nil
		},
	}
	create.Flags().StringVar(&sf.endpoint, "dynamodb-endpoint", "", "DynamoDB endpoint URL (default: the AWS default chain)")
	create.Flags().StringVar(&sf.prefix, "table-prefix", dynamotables.DefaultPrefix, "prefix of the table names")
	create.Flags().StringVar(&sf.region, "region", "", "AWS region (default: from the AWS config; us-east-1 with a local endpoint)")
	tc.AddCommand(create)
	rootCmd.AddCommand(tc)
}
