package run

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/eval"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/secrets"
)

// RunnerChoice is a run's runner settings after parsing --runner-option.
type RunnerChoice struct {
	// Options are the runner's own options.
	Options map[string]string
	Shards  int
	Keep    string
}

// ParseRunnerOptions reads --runner-option key=value pairs for def: MST's own
// shards (default 1, at most def.MaxShards) and keep (never, failed,
// always), and the runner's options, checked against its schema. Options
// are recorded in run.json, so a value that looks like a secret (a secrets
// file value, a long random-looking string, a key name such as token) is
// refused.
func ParseRunnerOptions(def *runner.Definition, pairs []string, known *secrets.Set) (RunnerChoice, error) {
	c := RunnerChoice{Options: map[string]string{}, Shards: 1, Keep: runner.KeepNever}
	typed := map[string]any{}
	var props map[string]struct {
		Type string `json:"type"`
	}
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	json.Unmarshal(def.Options, &schema)
	props = schema.Properties
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return c, fmt.Errorf("--runner-option %q: write key=value", kv)
		}
		switch k {
		case "shards":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("--runner-option shards=%s: shards is a whole number, 1 or more", v)
			}
			if n > def.MaxShards {
				if def.MaxShards == 1 {
					return c, fmt.Errorf("--runner-option shards=%d: the %s runner runs one shard; use --runner processes (or another runner) for more", n, def.Name)
				}
				return c, fmt.Errorf("--runner-option shards=%d: the %s runner runs at most %d shards", n, def.Name, def.MaxShards)
			}
			c.Shards = n
			continue
		case "keep":
			if v != runner.KeepNever && v != runner.KeepFailed && v != runner.KeepAlways {
				return c, fmt.Errorf("--runner-option keep=%s: keep is never, failed or always", v)
			}
			c.Keep = v
			continue
		}
		if err := notSecret(k, v, known); err != nil {
			return c, fmt.Errorf("--runner-option %s: %w", k, err)
		}
		c.Options[k] = v
		switch props[k].Type {
		case "integer", "number":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return c, fmt.Errorf("--runner-option %s=%s: %s takes a number", k, v, k)
			}
			typed[k] = n
		case "boolean":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, fmt.Errorf("--runner-option %s=%s: %s takes true or false", k, v, k)
			}
			typed[k] = b
		default:
			typed[k] = v
		}
	}
	raw, _ := json.Marshal(typed)
	problems, err := eval.CheckOptions(def.Options, raw)
	if err != nil {
		return c, fmt.Errorf("runner %s: %w", def.Name, err)
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("--runner-option: %s (runner %s; shards and keep are MST's own)", strings.Join(problems, "; "), def.Name)
	}
	return c, nil
}

var (
	secretKey    = regexp.MustCompile(`(?i)(token|secret|password|passwd|apikey|api_key|credential)`)
	secretPrefix = regexp.MustCompile(`^(sk-|sk_|ghp_|gho_|github_pat_|xox[abp]-|AKIA|AIza|ya29\.)`)
)

// notSecret refuses option values that look like secrets: they would be
// written to run.json.
func notSecret(key, value string, known *secrets.Set) error {
	if secretKey.MatchString(key) {
		return fmt.Errorf("options are recorded in run.json, and %s looks like it holds a secret: put it in the secrets file instead", key)
	}
	if known != nil {
		for _, name := range known.Names() {
			if v, _ := known.Get(name); v != "" && strings.Contains(value, v) {
				return fmt.Errorf("the value holds the secret %s: options are recorded in run.json", name)
			}
		}
	}
	if secretPrefix.MatchString(value) || looksRandom(value) {
		return fmt.Errorf("the value looks like a key or token, and options are recorded in run.json: put it in the secrets file instead")
	}
	return nil
}

// looksRandom reports whether s is a long run of letters and digits mixing
// cases and digits, as keys and tokens are.
func looksRandom(s string) bool {
	if len(s) < 24 || strings.ContainsAny(s, "/ .:") {
		return false
	}
	var lower, upper, digit int
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			lower++
		case r >= 'A' && r <= 'Z':
			upper++
		case r >= '0' && r <= '9':
			digit++
		}
	}
	return lower > 0 && upper > 0 && digit > 0 && lower+upper+digit >= len(s)*9/10
}
