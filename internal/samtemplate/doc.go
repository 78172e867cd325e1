// Package samtemplate holds no code: its tests keep the AWS deployment files at the repository
// root in step with the code. They parse template.yaml (the AWS SAM template: the Kinesis
// stream, the DynamoDB tables, the module bucket, the on-failure queue, the Lambda function and
// its event source mapping, or the ECS Fargate workers) with goformation and check the event
// source mapping's settings, the tables' key schemas against internal/dynamotables, the IAM
// policies (no wildcard action, only the calls the code makes) and the function's environment
// against lambda.EnvVars; they parse the Dockerfile (non-root user, entrypoint), and decode the
// sample event of `sam local invoke` (lambda/testdata/kinesis-event.json).
package samtemplate
