// Package awsconfig loads the AWS SDK configuration the projhost clients share
// (internal/dynamotables for DynamoDB, source/kinesis for Kinesis, registry/s3blobs for S3),
// with the rules for a local endpoint.
package awsconfig

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// LocalRegion is the region used with an explicit endpoint when none is configured.
const LocalRegion = "us-east-1"

// Options says what Load builds on.
type Options struct {
	// Endpoint is a service endpoint URL ("" = AWS's for the region). With one, IMDS is not
	// consulted, the region defaults to LocalRegion, and dummy static credentials
	// ("local"/"local") stand in when none are found: local servers accept any signature.
	Endpoint string
	// Region overrides the configured region when not "".
	Region string
	// Credentials overrides the configured credentials when not nil.
	Credentials aws.CredentialsProvider
	// Base is used (copied) instead of loading the AWS default chain when not nil.
	Base *aws.Config
}

// Load returns the configuration: Base or the AWS default chain (environment, shared config,
// SSO, IMDS...), with Options applied. Errors: loading the shared configuration failed.
func Load(ctx context.Context, o Options) (aws.Config, error) {
	var cfg aws.Config
	if o.Base != nil {
		cfg = o.Base.Copy()
	} else {
		var load []func(*config.LoadOptions) error
		if o.Endpoint != "" {
			load = append(load, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
		}
		var err error
		if cfg, err = config.LoadDefaultConfig(ctx, load...); err != nil {
			return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
		}
	}
	if o.Region != "" {
		cfg.Region = o.Region
	}
	if o.Credentials != nil {
		cfg.Credentials = o.Credentials
	}
	if o.Endpoint != "" {
		if cfg.Region == "" {
			cfg.Region = LocalRegion
		}
		if !hasCredentials(ctx, cfg.Credentials) {
			cfg.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		}
	}
	return cfg, nil
}

func hasCredentials(ctx context.Context, p aws.CredentialsProvider) bool {
	if p == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := p.Retrieve(ctx)
	return err == nil && c.HasKeys()
}
