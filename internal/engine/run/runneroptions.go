package run

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/internal/engine/eval"
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
// are recorded in run.json, so an option whose name or value holds a
// secret anywhere (a value of known, in any escaped form; a key shape such
// as sk-…; user:password@host; a long random-looking run; a name such as
// token) is refused, naming the option and what was found, never the value.
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
	for i, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		// The whole pair is scanned before any message quotes part of it,
		// so a refused value is never printed.
		if err := notSecret(i+1, k, v, known); err != nil {
			return c, err
		}
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
	// optionName is what a runner option's name looks like; a name that
	// does not is not quoted back.
	optionName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	// secretWord in an option's name, or before an = inside its value
	// (?access_token=...), says that what follows is a secret.
	secretWord = `(?i)(token|secret|password|passwd|apikey|api_key|credential)`
	secretKey  = regexp.MustCompile(secretWord)
	redacted   = regexp.MustCompile(`\[redacted:([^\]]+)\]`)
	// secretShapes are the shapes of credentials looked for anywhere in an
	// option's name and value, besides long random-looking runs (see
	// looksRandom). docs/secrets.md lists them; keep the two in step.
	secretShapes = []struct {
		what string
		re   *regexp.Regexp
	}{
		{"a key or token (the shape of a provider key: sk-…, ghp_…, AKIA…)", regexp.MustCompile(
			`(^|[^A-Za-z0-9])(sk-|sk_|rk_|ghp_|gho_|ghs_|ghu_|ghr_|github_pat_|glpat-|xox[abpr]-|AKIA|ASIA|AIza|ya29\.)[A-Za-z0-9_\-]{8,}`)},
		{"a key or token (a password in user:password@host)", regexp.MustCompile(`(^|[/\s])[^/\s:@]*:[^/\s@]+@[^\s@]`)},
		{"a key or token (a name=value pair whose name says secret)", regexp.MustCompile(secretWord + `[A-Za-z0-9_\-]*=[^&;\s]`)},
	}
)

// notSecret refuses an option whose name or value holds a secret: options
// are written to run.json. It names the option only when its name is an
// ordinary one holding no secret, and never quotes what it found.
func notSecret(position int, key, value string, known *secrets.Set) error {
	name := fmt.Sprintf("--runner-option number %d", position)
	keyProblem := secretIn(key, known)
	if keyProblem == "" && optionName.MatchString(key) {
		name = "--runner-option " + key
		if secretKey.MatchString(key) {
			return fmt.Errorf("%s: options are recorded in run.json, and %s looks like it holds a secret: put it in the secrets file instead", name, key)
		}
	}
	if keyProblem != "" {
		return fmt.Errorf("%s: its name holds %s; options are recorded in run.json, so they must hold no secret (the value is not shown)", name, keyProblem)
	}
	if p := secretIn(value, known); p != "" {
		return fmt.Errorf("%s: the value holds %s; options are recorded in run.json, so they must hold no secret: put it in the secrets file instead (the value is not shown)", name, p)
	}
	return nil
}

// secretIn says what secret s holds, or "": a known value (in any of the
// forms the redaction knows, escaped or not), a secret shape, or a long
// random-looking run between separators.
func secretIn(s string, known *secrets.Set) string {
	if known != nil {
		if m := redacted.FindAllStringSubmatch(secrets.NewRedactor(known).String(s), -1); len(m) > 0 {
			var names []string
			for _, sub := range m {
				if !slices.Contains(names, sub[1]) {
					names = append(names, sub[1])
				}
			}
			return "the secret " + strings.Join(names, ", ")
		}
	}
	for _, sh := range secretShapes {
		if sh.re.MatchString(s) {
			return "what looks like " + sh.what
		}
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		if looksRandom(part) {
			return "what looks like a key or token (a long random-looking run of letters and digits)"
		}
	}
	return ""
}

// looksRandom reports whether s is a long run of letters and digits mixing
// cases and digits as keys and tokens do: the kind of character changes
// often (at least every second one), which camel-case names with a number
// (TestSSHQuickstart3901495322, a Go test's temporary folder) do not do.
func looksRandom(s string) bool {
	if len(s) < 24 {
		return false
	}
	class := func(r rune) int {
		switch {
		case r >= 'a' && r <= 'z':
			return 1
		case r >= 'A' && r <= 'Z':
			return 2
		case r >= '0' && r <= '9':
			return 3
		}
		return 0
	}
	var seen [4]int
	changes, prev := 0, -1
	for _, r := range s {
		c := class(r)
		seen[c]++
		if prev >= 0 && c != prev {
			changes++
		}
		prev = c
	}
	return seen[1] > 0 && seen[2] > 0 && seen[3] > 0 && seen[1]+seen[2]+seen[3] >= len(s)*9/10 && changes*2 >= len(s)
}
