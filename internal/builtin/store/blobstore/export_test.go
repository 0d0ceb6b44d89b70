package blobstore

// WithGCSEndpoint returns o opening gs:// stores at the GCS emulator at
// host (HOST:PORT) rather than STORAGE_EMULATOR_HOST's, so that tests
// that run in parallel need not set the variable.
func WithGCSEndpoint(o Options, host string) Options {
	o.gcsEndpoint = host
	return o
}
