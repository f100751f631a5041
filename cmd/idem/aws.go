package main

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/ddbstore"
)

// open loads the AWS configuration (awsConfig), checks the table's key
// schema, and returns the store on the table.
func (c *cli) open(ctx context.Context, o *common) (*ddbstore.Store, error) {
	storeOpts, err := o.layout.options()
	if err != nil {
		return nil, err
	}
	client, err := c.dynamoClient(ctx, o)
	if err != nil {
		return nil, err
	}
	store, err := ddbstore.New(client, o.table, storeOpts...)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	if err := ddbstore.CheckTable(ctx, client, o.table, storeOpts...); err != nil {
		return nil, err
	}
	return store, nil
}

// dynamoClient returns a DynamoDB client of the configuration the flags
// name.
func (c *cli) dynamoClient(ctx context.Context, o *common) (*dynamodb.Client, error) {
	cfg, err := c.awsConfig(ctx, o.profile, o.region)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.endpoint != "" {
			do.BaseEndpoint = aws.String(o.endpoint)
		}
	}), nil
}

// awsConfig loads the AWS configuration the SDK's way
// (config.LoadDefaultConfig: profiles, AWS_REGION, credentials, the
// endpoint variables such as AWS_ENDPOINT_URL_DYNAMODB) and checks that it
// has a region and credentials.
func (c *cli) awsConfig(ctx context.Context, profile, region string) (aws.Config, error) {
	var loadOpts []func(*config.LoadOptions) error
	if profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(profile))
	}
	if region != "" {
		loadOpts = append(loadOpts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return aws.Config{}, &configError{msg: "cannot load the AWS configuration (check --profile and AWS_PROFILE)", err: err}
	}
	if cfg.Region == "" {
		return aws.Config{}, &configError{msg: "no AWS region: pass --region, set AWS_REGION, or use a profile that has one"}
	}
	if err := c.credentials(ctx, cfg.Credentials); err != nil {
		return aws.Config{}, err
	}
	return cfg, nil
}

// credentials checks that the configuration yields credentials, so that
// their absence is reported as such rather than as a failed request.
func (c *cli) credentials(ctx context.Context, p aws.CredentialsProvider) error {
	const msg = "no AWS credentials: use a profile (--profile, AWS_PROFILE), set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where a role provides them"
	if p == nil {
		return &configError{msg: msg}
	}
	if _, err := p.Retrieve(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &configError{msg: msg, err: err}
	}
	return nil
}
