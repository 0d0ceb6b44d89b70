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
	builtins          []string // the builtinTools turned on
}

// providerID is the name of MST's model provider in config.toml.
const providerID = "mst"

// Builtin tool names (clientOptions builtinTools), each with what it does.
// Every one maps to switches of the CLI's config; with none of them on the
// model sees no tool of the CLI's own but alwaysOnTools.
var builtinTools = map[string]string{
	builtinShell:      "runs commands through the CLI's exec_command and write_stdin tools, in the trial's folder, the only place they may write, with no network",
	builtinApplyPatch: "edits files with apply_patch in the trial's folder, for models whose Codex metadata offers that tool; the CLI's sandbox is read-only unless this or shell is on",
	builtinWebSearch:  "searches the web live through the provider",
	builtinViewImage:  "shows the model a local image file",
}

// alwaysOnTools are the CLI's own tools no setting turns off (Codex CLI
// 0.171 adds them whenever it has an MCP server, and its config has no
// switch for them: `codex features list` names none, and each candidate
// key is reported as ignored). They only read MCP resources, which MST's
// proxy in front of the variant's servers does not offer, so a call finds
// none.
var alwaysOnTools = map[string]string{
	"list_mcp_resources":          "lists the MCP resources of the variant's servers",
	"list_mcp_resource_templates": "lists the MCP resource templates of the variant's servers",
	"read_mcp_resource":           "reads an MCP resource of one of the variant's servers",
}

const (
	builtinShell      = "shell"
	builtinApplyPatch = "apply_patch"
	builtinWebSearch  = "web_search"
	builtinViewImage  = "view_image"
)

// offFeatures are the CLI's features that add tools (or let the model act
// beyond the trial) and that no builtinTools name turns on.
var offFeatures = []string{"goals", "image_generation", "sleep_tool", "apps", "plugins", "remote_plugin", "tool_suggest", "memories", "hooks"}

// configTOML renders c as the CLI's config.toml. Every string is a TOML
// basic string and every key coming from the eval config is quoted. It
// names no MCP server: each trial layers its own servers on top (see
// serversTOML).
func configTOML(c config) string {
	on := map[string]bool{}
	for _, n := range c.builtins {
		on[n] = true
	}
	var b strings.Builder
	kv := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	kv("model", tomlString(c.model))
	kv("model_provider", tomlString(providerID))
	if c.reasoningEffort != "" {
		kv("model_reasoning_effort", tomlString(c.reasoningEffort))
	}
	// Under "never" the CLI asks no one: a call it would ask about is
	// refused, unless approved in advance (default_tools_approval_mode).
	kv("approval_policy", tomlString("never"))
	// Only the CLI's own tools run in its sandbox (the MCP servers do not):
	// read-only everywhere, or writable in the trial's folder alone when a
	// tool that writes is on.
	if on[builtinShell] || on[builtinApplyPatch] {
		kv("sandbox_mode", tomlString("workspace-write"))
	} else {
		kv("sandbox_mode", tomlString("read-only"))
	}
	if on[builtinWebSearch] {
		kv("web_search", tomlString("live"))
	} else {
		kv("web_search", tomlString("disabled"))
	}
	kv("check_for_update_on_startup", "false")
	b.WriteString("\n[analytics]\nenabled = false\n")
	// The workspace is the trial's folder only: not TMPDIR, not /tmp.
	b.WriteString("\n[sandbox_workspace_write]\nnetwork_access = false\nexclude_tmpdir_env_var = true\nexclude_slash_tmp = true\n")
	// The CLI's environment holds the servers' values (see serversTOML):
	// the commands the model runs get only the core variables (HOME, PATH,
	// USER, TMPDIR and the like), never the CLI's others.
	b.WriteString("\n[shell_environment_policy]\ninherit = \"core\"\nexclude = [\"MST_*\"]\n")
	b.WriteString("\n[features]\n")
	kv("shell_tool", fmt.Sprint(on[builtinShell]))
	kv("unified_exec", fmt.Sprint(on[builtinShell]))
	kv("view_image", fmt.Sprint(on[builtinViewImage]))
	for _, f := range offFeatures {
		kv(f, "false")
	}
	// Subagents (spawn_agent and the rest).
	b.WriteString("\n[agents]\nenabled = false\n")
	b.WriteString("\n[tools.experimental_request_user_input]\nenabled = false\n")
	b.WriteString("\n[tools.update_plan]\nenabled = false\n")
	// The CLI's bundled skills would add instructions about tools the trial
	// does not have.
	b.WriteString("\n[skills]\ninclude_instructions = false\n")
	fmt.Fprintf(&b, "\n[model_providers.%s]\n", providerID)
	kv("name", tomlString("MST"))
	kv("base_url", tomlString(c.baseURL))
	kv("wire_api", tomlString("responses"))
	kv("env_key", tomlString(c.keyEnv))
	kv("request_max_retries", fmt.Sprint(c.requestMaxRetries))
	kv("stream_max_retries", fmt.Sprint(c.streamMaxRetries))
	return b.String()
}

// serverEnvPrefix starts the names of the CLI's variables that carry HTTP
// header values; config.toml names the variable (env_http_headers), never
// the value.
const serverEnvPrefix = "MST_CODEX_HEADER_"

// serversTOML renders srvs as the mcp_servers tables of a trial's config
// layer, and returns the variables to add to the CLI's environment for
// them, so that no value of a server's variables or headers is written to
// a file. base is the CLI's own environment. A stdio server's variables
// are forwarded by name from the CLI's environment (env_vars); only a
// variable of the CLI's that shapes where programs and files are found
// (PATH, HOME, TMPDIR, ...: see inlineEnv) and that the server sets to
// another value is written in env. An HTTP server's headers are read from
// variables of the CLI's (env_http_headers). A variable that two servers,
// or a server and the CLI, need with different values is an error.
func serversTOML(srvs []servers.Server, base map[string]string) (string, map[string]string, error) {
	var b strings.Builder
	kv := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	env := map[string]string{}
	owner := map[string]string{}
	for i, s := range srvs {
		fmt.Fprintf(&b, "[mcp_servers.%s]\n", tomlString(s.Name))
		if s.URL != "" {
			kv("url", tomlString(s.URL))
			if len(s.Headers) > 0 {
				names := map[string]string{}
				for j, h := range sortedKeys(s.Headers) {
					v := fmt.Sprintf("%s%d_%d", serverEnvPrefix, i, j)
					names[h] = v
					env[v] = s.Headers[h]
				}
				kv("env_http_headers", tomlTable(names))
			}
		} else {
			kv("command", tomlString(s.Command))
			args := make([]string, len(s.Args))
			for i, a := range s.Args {
				args[i] = tomlString(a)
			}
			kv("args", "["+strings.Join(args, ", ")+"]")
			inline := map[string]string{}
			var forward []string
			for _, k := range sortedKeys(s.Env) {
				v := s.Env[k]
				if cli, ok := base[k]; ok {
					switch {
					case cli == v:
						forward = append(forward, tomlString(k))
					case inlineEnv[strings.ToUpper(k)]:
						inline[k] = v
					default:
						return "", nil, fmt.Errorf("server %q sets the variable %s, which the Codex CLI itself needs with another value; codex-cli hands a server its variables by name from the CLI's own environment (so that no value is written to a file): give the server's variable another name", s.Name, k)
					}
					continue
				}
				if prev, ok := env[k]; ok && prev != v {
					return "", nil, fmt.Errorf("servers %q and %q set the variable %s to different values; codex-cli hands a server its variables by name from the CLI's own environment (so that no value is written to a file), which holds one value per name: give one of the servers another variable name, or put them in separate variants", owner[k], s.Name, k)
				}
				env[k], owner[k] = v, s.Name
				forward = append(forward, tomlString(k))
			}
			if len(inline) > 0 {
				kv("env", tomlTable(inline))
			}
			if len(forward) > 0 {
				kv("env_vars", "["+strings.Join(forward, ", ")+"]")
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
		b.WriteString("\n")
	}
	return b.String(), env, nil
}

// inlineEnv are the variables of the CLI's environment that a server may
// set to values of its own in config.toml: they say where programs and
// files are, and hold no secret.
var inlineEnv = map[string]bool{"PATH": true, "HOME": true, "CODEX_HOME": true, "TMPDIR": true, "TEMP": true, "TMP": true, "LANG": true, "SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "SYSTEMROOT": true, "USERPROFILE": true, "APPDATA": true, "LOCALAPPDATA": true}

// sortedKeys returns m's keys, sorted.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tomlTable renders m as an inline table with quoted keys, sorted.
func tomlTable(m map[string]string) string {
	keys := sortedKeys(m)
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
