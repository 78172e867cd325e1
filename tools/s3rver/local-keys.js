// node -r ./local-keys.js node_modules/s3rver/bin/s3rver.js ...  : adds the access key "local"
// (secret "local") to s3rver's one account, beside its own S3RVER/S3RVER. projhost's clients use
// "local"/"local" with a local endpoint when no credentials are configured (internal/awsconfig),
// and s3rver refuses an access key it does not know (InvalidAccessKeyId) even with
// --allow-mismatched-signatures.
require('s3rver/lib/models/account').DUMMY_ACCOUNT.createKeyPair('local', 'local')
