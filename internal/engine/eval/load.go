package eval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
	mcpservers "github.com/mst-eval/mst/servers"
)

// Load reads, checks and decodes the eval config at path (.yaml, .yml or
// .json). cat supplies the clients' option schemas and the graders.
//
// Every problem in the file is reported, not just the first: the error is
// an Errors, sorted by path. Old names fail with their replacement. Datasets
// must exist but are not read.
func Load(path string, cat Catalog) (*Config, error) {
	return LoadWith(path, cat, LoadOptions{})
}

// LoadOptions change how LoadWith reads a config that is not where it was
// written: a detached run's coordinator reads the copy the launching
// machine shipped.
type LoadOptions struct {
	// Dir, when set, is the folder the config's relative paths (datasets,
	// server commands and folders) start from, in place of the folder the
	// file is in: the launching machine's config folder.
	Dir string
	// DatasetsLoaded says the datasets come already loaded (mst run
	// --loaded-datasets): their files need not exist here.
	DatasetsLoaded bool
}

// LoadWith is Load with o.
func LoadWith(path string, cat Catalog, o LoadOptions) (*Config, error) {
	l := &loader{file: path, cat: cat, opts: o}
	cfg := l.load()
	if len(l.errs) > 0 {
		return nil, sortErrors(l.errs)
	}
	return cfg, nil
}

// loader holds the state of one Load.
type loader struct {
	file string
	cat  Catalog
	opts LoadOptions
	doc  *document
	dir  string
	errs Errors
}

// fail records a problem with the whole file.
func (l *loader) fail(p position, msg string) {
	l.errs = append(l.errs, Error{File: l.file, Line: p.line, Col: p.col, Msg: msg})
}

// add records a problem at a location in the config.
func (l *loader) add(tokens []string, msg string) {
	p := l.doc.position(tokens)
	l.errs = append(l.errs, Error{File: l.file, Path: formatPath(l.doc.root, tokens), Line: p.line, Col: p.col, Msg: msg})
}

func (l *loader) load() *Config {
	data, err := inputcheck.ReadFile(l.file, inputcheck.MaxConfigBytes)
	switch {
	case errors.Is(err, inputcheck.ErrTooLarge):
		l.fail(position{}, err.Error()+" in a config")
		return nil
	case errors.Is(err, fs.ErrNotExist):
		l.fail(position{}, "no such file (check the path; run mst validate FILE)")
		return nil
	case err != nil:
		if st, serr := os.Stat(l.file); serr == nil && st.IsDir() {
			l.fail(position{}, "is a folder, not a config file")
			return nil
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		l.fail(position{}, fmt.Sprintf("cannot read the config: %v", err))
		return nil
	}
	abs, err := filepath.Abs(l.file)
	if err != nil {
		l.fail(position{}, fmt.Sprintf("cannot resolve the config's folder: %v", err))
		return nil
	}
	l.dir = filepath.Dir(abs)
	if l.opts.Dir != "" {
		l.dir = filepath.Clean(l.opts.Dir)
	}
	return l.loadData(data)
}

// loadData checks and decodes the config's content.
func (l *loader) loadData(data []byte) *Config {
	// A byte order mark, which some editors put first, is not part of
	// the text: left in, it would make the first key \ufeffname.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if p := inputcheck.Text(data, "config"); p != nil {
		l.fail(position{line: p.Line, col: p.Col}, p.Msg)
		return nil
	}
	if i := bytes.Index(data, []byte("\ufeff")); i >= 0 {
		line, col := inputcheck.At(data, i)
		l.fail(position{line: line, col: col}, "a byte order mark (U+FEFF, an invisible character) inside the file: delete it; only the very start of a file may hold one")
		return nil
	}

	var serr *syntaxError
	switch ext := strings.ToLower(filepath.Ext(l.file)); ext {
	case ".yaml", ".yml":
		l.doc, serr = parseYAML(data)
	case ".json":
		l.doc, serr = parseJSON(data)
	default:
		l.fail(position{}, fmt.Sprintf("unsupported config format %q: name the file .yaml, .yml or .json", ext))
		return nil
	}
	if serr != nil {
		l.fail(serr.position, serr.msg)
		return nil
	}
	if l.checkUTF8(l.doc.root, nil); len(l.errs) > 0 {
		return nil
	}
	root, ok := l.doc.root.(map[string]any)
	if !ok {
		l.fail(position{}, "the config must be an object of keys (name, datasets, servers, variants, …), got "+describe(l.doc.root))
		return nil
	}

	l.migrate(root)
	l.checkSchema(root)
	l.checkDatasets(root)
	l.checkPlugins(root)
	l.checkServers(root)
	l.checkVariants(root)
	l.checkClients(root) // clients.go
	if len(l.errs) > 0 {
		return nil
	}
	cfg := l.decode(root)
	if cfg == nil {
		return nil
	}
	sum := sha256.Sum256(data)
	cfg.Hash = hex.EncodeToString(sum[:])
	cfg.File = l.file
	cfg.Dir = l.dir
	return cfg
}

// Messages for names an earlier MST accepted.
const (
	runnerMoved    = "the runner is not part of the eval: pass --runner on mst run"
	providerGone   = "removed: the client and the OS decide how it runs; delete this option"
	maxActionsName = "renamed: use maxActions"
)

// migrate reports the names that earlier versions of MST accepted and
// removes them (or puts their replacement in place) so that later checks
// do not report them a second time.
func (l *loader) migrate(root map[string]any) {
	for _, k := range []string{"runner", "env", "environment"} {
		if _, ok := root[k]; ok {
			l.add([]string{k}, runnerMoved)
			delete(root, k)
		}
	}
	variants, _ := root["variants"].(map[string]any)
	for _, name := range sortedKeys(variants) {
		v, ok := variants[name].(map[string]any)
		if !ok {
			continue
		}
		at := []string{"variants", name}
		for _, k := range []string{"runner", "env", "environment"} {
			if _, ok := v[k]; ok {
				l.add(child(at, k), runnerMoved)
				delete(v, k)
			}
		}
		client, _ := v["client"].(string)
		switch client {
		case "mst":
			l.add(child(at, "client"), `client "mst" was renamed: use api`)
			v["client"] = "api"
		case "codex":
			l.add(child(at, "client"), `client "codex" was renamed: use codex-cli`)
			v["client"] = "codex-cli"
		}
		opts, ok := v["clientOptions"].(map[string]any)
		if !ok {
			continue
		}
		optsAt := child(at, "clientOptions")
		if surface, has := opts["surface"]; has && client == "chatgpt" {
			if surface == "codex" {
				l.add(child(at, "client"), `client "chatgpt" with surface "codex" was renamed: use codex-app and delete clientOptions.surface`)
				v["client"] = "codex-app"
			} else {
				l.add(child(optsAt, "surface"), "removed: chatgpt is always the ChatGPT app (the Codex surface is the codex-app client); delete this option")
			}
			delete(opts, "surface")
		}
		if _, has := opts["computerUseProvider"]; has {
			l.add(child(optsAt, "computerUseProvider"), providerGone)
			delete(opts, "computerUseProvider")
		}
		for _, k := range []string{"computerUseMaxActions", "nativeMaxActions"} {
			if _, has := opts[k]; has {
				l.add(child(optsAt, k), maxActionsName)
				delete(opts, k)
			}
		}
	}
}

// checkSchema validates the config against its JSON Schema, and each grader
// through the catalog. A grader the catalog rejects is reported in the
// catalog's words instead of the schema's.
func (l *loader) checkSchema(root map[string]any) {
	sdoc, err := buildSchema(l.cat)
	if err != nil {
		l.fail(position{}, err.Error())
		return
	}
	cs, err := compile(SchemaID, sdoc)
	if err != nil {
		l.fail(position{}, fmt.Sprintf("eval: compiling the config schema: %v", err))
		return
	}
	var problems []problem
	if err := cs.schema.Validate(root); err != nil {
		x := &explainer{cs: cs, doc: l.doc, noun: "key"}
		problems = x.explain(err)
	}
	graders, _ := root["graders"].([]any)
	for i, g := range graders {
		at := []string{"graders", strconv.Itoa(i)}
		raw, err := json.Marshal(g)
		if err != nil {
			continue
		}
		if err := l.cat.ParseGrader(raw); err != nil {
			problems = slices.DeleteFunc(problems, func(p problem) bool { return hasPrefix(p.tokens, at) })
			msg := err.Error()
			if m, ok := g.(map[string]any); ok && len(m) == 1 && strings.HasPrefix(msg, "unknown grader") {
				for k := range m {
					msg += l.installHint(k)
				}
			}
			problems = append(problems, problem{at, msg})
		}
	}
	for _, p := range problems {
		l.add(p.tokens, p.msg)
	}
}

// checkDatasets resolves each dataset path and checks that the file exists.
func (l *loader) checkDatasets(root map[string]any) {
	list, _ := root["datasets"].([]any)
	seen := map[string]int{}
	for i, item := range list {
		at := []string{"datasets", strconv.Itoa(i)}
		if m, ok := item.(map[string]any); ok {
			_, hasPath := m["path"]
			_, hasSource := m["source"]
			_, hasOptions := m["options"]
			switch {
			case hasPath && hasSource:
				l.add(at, "give path (a case file) or source (a dataset source), not both")
				continue
			case hasSource:
				if !l.opts.DatasetsLoaded {
					l.checkSource(at, m)
				}
				continue
			case hasOptions:
				l.add(child(at, "options"), "options go with source (a dataset source); a case file takes none")
				continue
			case !hasPath:
				l.add(child(at, "path"), "missing required key")
				continue
			}
		}
		p, ok := datasetPath(item)
		if !ok || p == "" {
			continue
		}
		abs := l.resolve(p)
		if j, dup := seen[abs]; dup {
			l.add(at, fmt.Sprintf("%s is listed twice (also datasets[%d])", p, j))
			continue
		}
		seen[abs] = i
		if l.opts.DatasetsLoaded {
			continue
		}
		st, err := os.Stat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			l.add(at, fmt.Sprintf("no such file %s (looked for %s)", p, abs))
		case err != nil:
			l.add(at, fmt.Sprintf("cannot read %s: %v", p, err))
		case st.IsDir():
			l.add(at, fmt.Sprintf("%s is a folder; give a case file (.jsonl, .json, .yaml, .yml or .csv)", p))
		}
	}
}

// datasetPath returns the path of a datasets entry, written either as a
// string or as {path: …}.
func datasetPath(item any) (string, bool) {
	switch v := item.(type) {
	case string:
		return v, true
	case map[string]any:
		s, ok := v["path"].(string)
		return s, ok
	}
	return "", false
}

func (l *loader) resolve(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(l.dir, p)
}

// ReservedServer is the one name a server may not take: the name under
// which transcripts record a client's own built-in tool calls
// (client.BuiltinServer, which this package cannot import).
const ReservedServer = "builtin"

// checkServers checks what the schema cannot: the reserved name, one
// transport per server, keys that belong to the other transport, the URL
// and the timeout.
func (l *loader) checkServers(root map[string]any) {
	servers, _ := root["servers"].(map[string]any)
	for _, name := range sortedKeys(servers) {
		if name == ReservedServer {
			l.add([]string{"servers", name}, fmt.Sprintf("the server name %q is reserved: transcripts record a client's own built-in tools (clientOptions.builtinTools) as calls of a server of that name; rename this server, e.g. to %s-server, and the variants, tool overrides and limits that name it", name, name))
		}
		s, ok := servers[name].(map[string]any)
		if !ok {
			continue
		}
		at := []string{"servers", name}
		_, hasCmd := s["command"]
		u, hasURL := s["url"]
		switch {
		case hasCmd && hasURL:
			l.add(at, "set either command (a stdio server) or url (an HTTP server), not both")
		case !hasCmd && !hasURL:
			l.add(at, "missing command or url: a stdio server needs command, an HTTP server needs url")
		case hasURL:
			for _, k := range []string{"args", "env", "cwd"} {
				if _, has := s[k]; has {
					l.add(child(at, k), "only a stdio server (one with command) takes "+k)
				}
			}
		case hasCmd:
			for _, k := range []string{"headers", "oauth"} {
				if _, has := s[k]; has {
					l.add(child(at, k), "only an HTTP server (one with url) takes "+k)
				}
			}
		}
		if o, ok := s["oauth"].(map[string]any); ok {
			if h, ok := s["headers"].(map[string]any); ok {
				for k := range h {
					if strings.EqualFold(k, "Authorization") {
						l.add(child(child(at, "headers"), k), "a connector server (one with oauth) gets its Authorization header from its OAuth grant; remove this header, or remove oauth and keep the header")
					}
				}
			}
			if _, has := o["clientSecret"]; has {
				if _, hasID := o["clientId"]; !hasID {
					l.add(child(child(at, "oauth"), "clientSecret"), "a client secret belongs to a preregistered client: set oauth.clientId too")
				}
			}
		}
		if us, ok := u.(string); ok && us != "" {
			pu, err := url.Parse(us)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				l.add(child(at, "url"), fmt.Sprintf("must be an http:// or https:// URL, got %q", us))
			}
		}
		for _, part := range []string{"env", "headers"} {
			vals, _ := s[part].(map[string]any)
			for _, k := range sortedKeys(vals) {
				if v, ok := vals[k].(string); ok {
					if p := mcpservers.SecretRefProblem(v); p != "" {
						l.add(child(child(at, part), k), p)
					}
				}
			}
		}
		if ts, ok := s["startupTimeout"].(string); ok {
			d, err := time.ParseDuration(ts)
			switch {
			case err != nil:
				l.add(child(at, "startupTimeout"), fmt.Sprintf("must be a duration such as 30s or 2m, got %q", ts))
			case d < 0:
				l.add(child(at, "startupTimeout"), fmt.Sprintf("must not be negative, got %q", ts))
			}
		}
	}
}

// checkVariants checks that variants, tool overrides and limits name
// declared servers.
func (l *loader) checkVariants(root map[string]any) {
	servers, _ := root["servers"].(map[string]any)
	declared := sortedKeys(servers)
	unknown := func(name string) string {
		return fmt.Sprintf("unknown server %q%s", name, hint(name, declared))
	}
	variants, _ := root["variants"].(map[string]any)
	for _, name := range sortedKeys(variants) {
		v, ok := variants[name].(map[string]any)
		if !ok {
			continue
		}
		at := []string{"variants", name}
		used := declared
		if list, ok := v["servers"].([]any); ok {
			used = nil
			if len(list) == 0 {
				l.add(child(at, "servers"), "must name at least one server; leave servers out to use all of them")
			}
			for i, item := range list {
				s, ok := item.(string)
				if !ok {
					continue
				}
				itemAt := append(child(at, "servers"), strconv.Itoa(i))
				switch {
				case servers == nil:
				case !hasKey(servers, s):
					l.add(itemAt, unknown(s))
				case slices.Contains(used, s):
					l.add(itemAt, fmt.Sprintf("server %q is listed twice", s))
				default:
					used = append(used, s)
				}
			}
		}
		tools, _ := v["tools"].(map[string]any)
		for _, srv := range sortedKeys(tools) {
			toolAt := append(child(at, "tools"), srv)
			switch {
			case servers == nil:
			case !hasKey(servers, srv):
				l.add(toolAt, unknown(srv))
			case !slices.Contains(used, srv):
				l.add(toolAt, fmt.Sprintf("server %q is not used by this variant (its servers: %s)", srv, strings.Join(used, ", ")))
			}
		}
		faults, _ := v["faults"].(map[string]any)
		for _, srv := range sortedKeys(faults) {
			faultAt := append(child(at, "faults"), srv)
			switch {
			case servers == nil:
			case !hasKey(servers, srv):
				l.add(faultAt, unknown(srv))
			case !slices.Contains(used, srv):
				l.add(faultAt, fmt.Sprintf("server %q is not used by this variant (its servers: %s)", srv, strings.Join(used, ", ")))
			}
			list, _ := faults[srv].([]any)
			for i, item := range list {
				f, _ := item.(map[string]any)
				if f["kind"] == "latency" {
					if _, has := f["delay"]; !has {
						l.add(append(faultAt, strconv.Itoa(i)), "a latency fault needs a delay, such as delay: 500ms")
					}
				}
			}
		}
	}
	limits, _ := root["limits"].(map[string]any)
	for _, key := range []string{"servers", "serverCalls"} {
		perServer, _ := limits[key].(map[string]any)
		for _, srv := range sortedKeys(perServer) {
			if servers != nil && !hasKey(servers, srv) {
				l.add([]string{"limits", key, srv}, unknown(srv))
			}
		}
	}
}

// clientSchema compiles a client's options schema. On failure it returns a
// message for the variant's client key.
func (l *loader) clientSchema(client string) (*compiledSchema, string) {
	raw, err := l.cat.ClientOptions(client)
	if err != nil {
		return nil, err.Error() + l.installHint(client)
	}
	var doc any = map[string]any{"type": "object", "additionalProperties": false}
	if len(bytes.TrimSpace(raw)) > 0 {
		doc, err = decodeJSONValue(raw)
		if err != nil {
			return nil, fmt.Sprintf("cannot check clientOptions: the options schema of client %q is not JSON: %v", client, err)
		}
	}
	cs, err := compile("https://github.com/mst-eval/mst/schema/clients/"+url.PathEscape(client)+".json", doc)
	if err != nil {
		return nil, fmt.Sprintf("cannot check clientOptions: the options schema of client %q does not compile: %v", client, err)
	}
	return cs, ""
}

// decode turns a checked config into a Config, filling in defaults and
// resolving paths.
func (l *loader) decode(root map[string]any) *Config {
	delete(root, "$schema")
	// results: {store: LOC} is the long form of results: LOC.
	if r, ok := root["results"].(map[string]any); ok {
		root["results"] = r["store"]
	}
	if list, ok := root["datasets"].([]any); ok {
		for i, item := range list {
			if p, ok := datasetPath(item); ok {
				list[i] = map[string]any{"path": l.resolve(p)}
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		l.fail(position{}, fmt.Sprintf("eval: encoding the checked config: %v", err))
		return nil
	}
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	cfg := &Config{}
	if err := dec.Decode(cfg); err != nil {
		l.fail(position{}, fmt.Sprintf("eval: decoding the checked config: %v", err))
		return nil
	}

	for name, s := range cfg.Servers {
		if s.Command != "" && !filepath.IsAbs(s.Command) && strings.ContainsAny(s.Command, `/`+string(filepath.Separator)) {
			s.Command = filepath.Join(l.dir, s.Command)
		}
		if s.Cwd != "" {
			s.Cwd = l.resolve(s.Cwd)
		}
		cfg.Servers[name] = s
	}
	all := sortedKeys(cfg.Servers)
	for name, v := range cfg.Variants {
		if v.Client == "" {
			v.Client = DefaultClient
		}
		if len(v.Servers) == 0 {
			v.Servers = slices.Clone(all)
		}
		cfg.Variants[name] = v
	}
	cfg.VariantOrder = slices.Clone(l.doc.keys[pointer([]string{"variants"})])
	if cfg.Trials == 0 {
		cfg.Trials = DefaultTrials
	}
	if cfg.Limits.Concurrency == 0 {
		cfg.Limits.Concurrency = DefaultConcurrency
	}
	if cfg.Results == "" {
		cfg.Results = DefaultResults
	}
	return cfg
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func hasPrefix(tokens, prefix []string) bool {
	return len(tokens) >= len(prefix) && slices.Equal(tokens[:len(prefix)], prefix)
}

// checkUTF8 reports every key and string under v that is not valid UTF-8
// (a YAML escape such as "\xff" makes one), rather than letting it be
// replaced silently later.
func (l *loader) checkUTF8(v any, tokens []string) {
	const msg = "invalid UTF-8 in this text (an escape such as \\xff makes a byte that is no character): write the text as UTF-8"
	switch v := v.(type) {
	case string:
		if !utf8.ValidString(v) {
			l.add(tokens, msg)
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			t := child(tokens, k)
			if !utf8.ValidString(k) {
				l.add(t, "invalid UTF-8 in this key: write the key as UTF-8")
				continue
			}
			l.checkUTF8(v[k], t)
		}
	case []any:
		for i, x := range v {
			l.checkUTF8(x, child(tokens, strconv.Itoa(i)))
		}
	}
}
