package lambda

// The environment variables cmd/bootstrap reads (its package documentation says what each
// means). They are here, not in cmd/bootstrap, so that the SAM template's test
// (internal/samtemplate) can check the function's Environment against them: cmd/bootstrap reads
// exactly these (its test checks that), and the template sets only these, with the required ones.
const (
	EnvProjection     = "PROJHOST_PROJECTION"
	EnvModuleStore    = "PROJHOST_MODULE_STORE"
	EnvTablePrefix    = "PROJHOST_TABLE_PREFIX"
	EnvRegion         = "PROJHOST_REGION"
	EnvDynamoEndpoint = "PROJHOST_DYNAMODB_ENDPOINT"
	EnvS3Endpoint     = "PROJHOST_S3_ENDPOINT"
	EnvOnError        = "PROJHOST_ON_ERROR"
	EnvMaxAttempts    = "PROJHOST_MAX_ATTEMPTS"
	EnvMemoryLimit    = "PROJHOST_MEMORY_LIMIT"
	EnvBatchDeadline  = "PROJHOST_BATCH_DEADLINE"
	EnvTrusted        = "PROJHOST_TRUSTED"
	EnvCacheDir       = "PROJHOST_CACHE_DIR"
	EnvReserve        = "PROJHOST_RESERVE"
	EnvLogLevel       = "PROJHOST_LOG_LEVEL"
)

// EnvVars returns every variable cmd/bootstrap reads, in the order of its documentation.
func EnvVars() []string {
	return []string{EnvProjection, EnvModuleStore, EnvTablePrefix, EnvRegion, EnvDynamoEndpoint, EnvS3Endpoint,
		EnvOnError, EnvMaxAttempts, EnvMemoryLimit, EnvBatchDeadline, EnvTrusted, EnvCacheDir, EnvReserve, EnvLogLevel}
}

// EnvRequired returns the variables cmd/bootstrap refuses to start without.
func EnvRequired() []string { return []string{EnvProjection, EnvModuleStore} }
