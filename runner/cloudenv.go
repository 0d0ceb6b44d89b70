package runner

import "os"

// CloudChainVars are the variables that tell the cloud SDKs' credential
// chains where to look: key files and profiles by path or name, the
// region, endpoints and emulators. None holds a secret itself (a key
// pair in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is left out on
// purpose). Workers that write transcripts into a bucket themselves read
// them: the processes runner keeps them in its workers' environment, and
// the docker runner passes those set here into the container.
var CloudChainVars = []string{
	// Google application default credentials, and fake-gcs-server.
	"GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "GOOGLE_CLOUD_PROJECT", "STORAGE_EMULATOR_HOST",
	// The AWS default chain: profiles and their files, web identity
	// (EKS), region and endpoints (S3-compatible services).
	"AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION", "AWS_DEFAULT_REGION",
	"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CA_BUNDLE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
	"AWS_ROLE_SESSION_NAME", "AWS_STS_REGIONAL_ENDPOINTS", "AWS_SDK_LOAD_CONFIG", "AWS_EC2_METADATA_DISABLED",
}

// SetCloudChainVars returns the names of CloudChainVars set (not empty)
// in this process's environment.
func SetCloudChainVars() []string {
	var out []string
	for _, k := range CloudChainVars {
		if os.Getenv(k) != "" {
			out = append(out, k)
		}
	}
	return out
}
