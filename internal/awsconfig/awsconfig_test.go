package awsconfig

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"
)

func TestLoad(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // no IMDS look-up for the case without an endpoint
	base := aws.Config{Region: "eu-west-1"}
	tests := []struct {
		name       string
		o          Options
		wantRegion string
		wantKey    string
	}{
		{"endpoint: local region, dummy credentials", Options{Endpoint: "http://127.0.0.1:1"}, LocalRegion, "local"},
		{"endpoint with region and credentials", Options{Endpoint: "http://127.0.0.1:1", Region: "ap-south-1",
			Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")}, "ap-south-1", "AK"},
		{"base config kept", Options{Base: &base, Endpoint: "http://127.0.0.1:1"}, "eu-west-1", "local"},
		{"no endpoint: nothing made up", Options{Region: "us-west-2"}, "us-west-2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(context.Background(), tt.o)
			require.NoError(t, err)
			require.Equal(t, tt.wantRegion, cfg.Region)
			key := ""
			if cfg.Credentials != nil {
				if c, err := cfg.Credentials.Retrieve(context.Background()); err == nil {
					key = c.AccessKeyID
				}
			}
			require.Equal(t, tt.wantKey, key)
		})
	}
	require.Equal(t, "eu-west-1", base.Region, "the base is copied, not changed")
}
