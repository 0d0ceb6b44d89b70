//go:build windows

package codexcli

// platformEnv are the variables of MST's own environment the CLI also gets
// on this OS, besides PATH and HOME.
var platformEnv = []string{"SystemRoot", "SystemDrive", "TEMP", "TMP", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "PATHEXT", "ComSpec"}
