//go:build windows

package geminicli

// platformEnv are the variables of MST's own environment the CLI also gets
// on this OS, besides PATH; HOME and USERPROFILE are the trial's own.
var platformEnv = []string{"SystemRoot", "SystemDrive", "TEMP", "TMP", "APPDATA", "LOCALAPPDATA", "PATHEXT", "ComSpec"}
