//go:build !windows

package geminicli

// platformEnv are the variables of MST's own environment the CLI also gets
// on this OS, besides PATH; HOME and TMPDIR are the trial's own.
var platformEnv = []string{"LANG", "SSL_CERT_FILE", "SSL_CERT_DIR"}
