package cli

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/engine/detach"
	"github.com/mst-eval/mst/transcript"
)

// resumeCommand is the command that finishes the run stored in the folder
// location, written so that it works when pasted into a POSIX shell from
// any folder: the run's folder made absolute and quoted, then the config
// file when the run's record does not lead to it (config: "" when it
// does), --secrets-file when this run was given one, --max-errored when
// it was set, then extra (e.g. --retry-errored). What a resume keeps by
// itself (the runner, its options, shards and keep, all in run.json) is
// not repeated. Every resume hint mst run prints is made here.
func resumeCommand(location, config string, f runFlags, extra ...string) string {
	args := []string{"mst", "run"}
	if config != "" {
		args = append(args, absPath(config))
	}
	args = append(args, "--resume", absPath(location))
	if f.secretsFile != "" {
		args = append(args, "--secrets-file", absPath(f.secretsFile))
	}
	if f.maxErroredSet {
		args = append(args, "--max-errored", f.maxErrored)
	}
	if f.store.name != "" && f.store.name != credstore.LocalName || len(f.store.options) > 0 {
		args = append(args, detach.StoreArgs(cmp.Or(f.store.name, credstore.LocalName), f.store.options)...)
	}
	args = append(args, extra...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// resumeConfig is the config argument a resume hint needs: "" when the
// run's record names the config this run was made from (the resume finds
// it by itself), else its path.
func resumeConfig(rec transcript.Run, file string) string {
	if file == "" || (rec.ConfigPath != "" && absPath(file) == rec.ConfigPath) {
		return ""
	}
	return file
}

// absPath is p made absolute, or p when that fails.
func absPath(p string) string {
	if isURL(p) {
		return p // a store URL (stores.go)
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// shellQuote quotes s for a POSIX shell: as it is when it holds only
// characters no shell treats specially, else in single quotes, each single
// quote of s written as '\”.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// resumeRunner is the runner and --runner-option pairs a resume runs
// with. A resume keeps how the run was started, as its run.json records
// it (info): the runner, its options, shards and keep. A --runner-option
// given on the resume replaces only the keys it names; --runner naming
// another runner starts from that runner's defaults and the options given.
// A record from before runners were recorded keeps nothing.
func resumeRunner(info transcript.RunnerInfo, f runFlags) (name string, pairs []string, kept bool) {
	if info.Name == "" || (f.runnerSet && f.runner != info.Name) {
		return f.runner, f.runnerOptions, false
	}
	recorded := maps.Clone(info.Options)
	if recorded == nil {
		recorded = map[string]string{}
	}
	if info.Shards > 0 {
		recorded["shards"] = strconv.Itoa(info.Shards)
	}
	if info.Keep != "" {
		recorded["keep"] = info.Keep
	}
	given := map[string]bool{}
	for _, kv := range f.runnerOptions {
		k, _, _ := strings.Cut(kv, "=")
		given[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(recorded)) {
		if !given[k] {
			pairs = append(pairs, k+"="+recorded[k])
		}
	}
	return info.Name, append(pairs, f.runnerOptions...), true
}

// describeRunner says, for a line on stderr, which runner settings a
// resume kept.
func describeRunner(name string, pairs []string) string {
	s := "--runner " + name
	for _, p := range pairs {
		s += " --runner-option " + shellQuote(p)
	}
	return s
}

// keptError adds to an error about runner options kept from run.json
// where they came from.
func keptError(err error, info transcript.RunnerInfo) error {
	return fmt.Errorf("%w (the resumed run was started with runner %s and these options, kept from its run.json: give --runner or --runner-option to change them)", err, info.Name)
}
