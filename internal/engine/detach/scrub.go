package detach

import (
	"path/filepath"
	"regexp"
	"strings"
)

// Scrubber takes the coordinator machine's own paths out of text bound
// for the result store (a status's error, commands and last lines, the
// log), which anyone who reads the store sees long after those paths
// have gone: the private secrets file in /dev/shm, its folder, and the
// bundle folder are named by what they are.
type Scrubber struct {
	// Bundle is the coordinator bundle's folder on its machine.
	Bundle string
	// SecretsFile is the private copy of the secrets file, "" for none.
	SecretsFile string
}

// Descriptions that replace the coordinator machine's paths.
const (
	SecretsFileText = "the coordinator's secrets file"
	secretsDirText  = "the coordinator's secrets folder"
	BundleText      = "the coordinator's bundle folder"
)

// shmPath is any path in /dev/shm, where only the private secrets are.
var shmPath = regexp.MustCompile(`/dev/shm(/[^\s'":,;)]*)?`)

// Text returns text with the coordinator machine's paths replaced.
func (s Scrubber) Text(text string) string {
	if s.SecretsFile != "" {
		text = strings.ReplaceAll(text, s.SecretsFile, SecretsFileText)
		text = strings.ReplaceAll(text, filepath.Dir(s.SecretsFile), secretsDirText)
	}
	if s.Bundle != "" && s.Bundle != "/" {
		text = strings.ReplaceAll(text, strings.TrimRight(s.Bundle, "/"), BundleText)
	}
	return shmPath.ReplaceAllString(text, SecretsFileText)
}

// Lines is Text of each line.
func (s Scrubber) Lines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = s.Text(l)
	}
	return out
}

// status is st with its text scrubbed.
func (s Scrubber) status(st Status) Status {
	st.Error = s.Text(st.Error)
	st.Commands = s.Lines(st.Commands)
	st.LastLines = s.Lines(st.LastLines)
	return st
}
