//go:build !windows

package codexcli

// platformEnv are the variables of MST's own environment the CLI also gets
// on this OS, besides PATH and HOME.
var platformEnv = []string{"TMPDIR", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR"}
