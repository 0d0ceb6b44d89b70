package codexcli

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mst-eval/mst/servers"
)

// config is what config.toml says.
type config struct {
	model             string
	baseURL           string
	keyEnv            string // the variable holding the key; never the key
	requestMaxRetries int
	streamMaxRetries  int
	reasoningEffort   string
	servers           []servers.Server
}

// providerID is the name of MST's model provider in config.toml.
const providerID = "mst"

// configTOML renders c as the CLI's config.toml. Every string is a TOML
// basic string and every key coming from the eval config is quoted.
func configTOML(c config) string {
	var b strings.Builder
	kv := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	kv("model", tomlString(c.model))
	kv("model_provider", tomlString(providerID))
	if c.reasoningEffort != "" {
		kv("model_reasoning_effort", tomlString(c.reasoningEffort))
	}
	kv("approval_policy", tomlString("never"))
	kv("sandbox_mode", tomlString("read-only"))
	kv("check_for_update_on_startup", "false")
	b.WriteString("\n[analytics]\nenabled = false\n")
	fmt.Fprintf(&b, "\n[model_providers.%s]\n", providerID)
	kv("name", tomlString("MST"))
	kv("base_url", tomlString(c.baseURL))
	kv("wire_api", tomlString("responses"))
	kv("env_key", tomlString(c.keyEnv))
	kv("request_max_retries", fmt.Sprint(c.requestMaxRetries))
	kv("stream_max_retries", fmt.Sprint(c.streamMaxRetries))
	for _, s := range c.servers {
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\n", tomlString(s.Name))
		if s.URL != "" {
			kv("url", tomlString(s.URL))
			if len(s.Headers) > 0 {
				kv("http_headers", tomlTable(s.Headers))
			}
		} else {
			kv("command", tomlString(s.Command))
			args := make([]string, len(s.Args))
			for i, a := range s.Args {
				args[i] = tomlString(a)
			}
			kv("args", "["+strings.Join(args, ", ")+"]")
			if len(s.Env) > 0 {
				kv("env", tomlTable(s.Env))
			}
			if s.Dir != "" {
				kv("cwd", tomlString(s.Dir))
			}
		}
		kv("required", "true")
		// Under approval_policy "never" the CLI refuses a tool it would ask
		// about (one not marked read-only); MST's trials approve every tool
		// of the variant's servers.
		kv("default_tools_approval_mode", tomlString("approve"))
		timeout := s.StartupTimeout
		if timeout <= 0 {
			timeout = defaultStartupTimeout
		}
		kv("startup_timeout_sec", fmt.Sprint(int64(math.Ceil(timeout.Seconds()))))
	}
	return b.String()
}

// tomlTable renders m as an inline table with quoted keys, sorted.
func tomlTable(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = tomlString(k) + " = " + tomlString(m[k])
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// tomlString renders s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
