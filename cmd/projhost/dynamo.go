package main

import (
	"context"
	"fmt"
)

func openDynamo(ctx context.Context, f *storeFlags) (*stores, error) {
	return nil, fmt.Errorf("--store dynamodb is not wired yet")
}
