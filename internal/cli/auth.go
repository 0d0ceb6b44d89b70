package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/builtin/credstore/bucketcreds"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/servers"
)

// storeFlags are --store and --store-option: the credential store that
// keeps connector servers' grants, for mst auth and mst run.
type storeFlags struct {
	name    string
	options []string
	parts   *builtin.Parts
	// secretsFile and results are the command's --secrets-file and
	// results store: a shared store takes its key from the one and, by
	// default, its place from the other.
	secretsFile, results string
}

func (f *storeFlags) add(fs *pflag.FlagSet, parts *builtin.Parts) {
	f.parts = parts
	fs.StringVar(&f.name, "store", credstore.LocalName, "the credential store that keeps the OAuth grants of connector servers: "+strings.Join(parts.CredentialStores().Names(), ", "))
	fs.StringArrayVar(&f.options, "store-option", nil, "credential store setting as KEY=VALUE (repeat); the local store takes dir=FOLDER (default ~/.config/mst/credentials) and key-file=FILE (default ~/.local/share/mst/credentials.key); the bucket store takes url=gs://BUCKET/PREFIX or s3://… (default: the results store's "+bucketcreds.DefaultFolder+"/) and its key from the secrets file ("+credstore.KeySecret+")")
}

// open opens the store the flags name.
func (f *storeFlags) open(ctx context.Context, logger *slog.Logger) (credstore.Store, *credstore.Definition, error) {
	reg := f.parts.CredentialStores()
	name := f.name
	if name == "" {
		name = credstore.LocalName
	}
	def, err := reg.Lookup(name)
	if err != nil {
		return nil, nil, withCode(ExitUsage, fmt.Errorf("--store: %w", err))
	}
	opts := map[string]string{}
	for _, kv := range f.options {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, nil, withCode(ExitUsage, fmt.Errorf("--store-option %q: write KEY=VALUE, such as --store-option dir=/path/to/folder", kv))
		}
		if _, dup := opts[k]; dup {
			return nil, nil, withCode(ExitUsage, fmt.Errorf("--store-option %s is given twice; give each key once", k))
		}
		opts[k] = v
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := credstore.Params{Options: opts, Logger: logger, Results: f.results,
		// Another mst holding a server's lock (refreshing its token, or
		// authorizing it) makes this one wait: say so, or it looks hung.
		LockWaiting: func(server string) {
			logger.Warn("waiting for another mst that holds this server's grant (it is refreshing or authorizing it)", "server", server)
		},
	}
	if f.secretsFile != "" {
		set, err := secrets.Load(f.secretsFile)
		if err != nil {
			return nil, nil, withCode(ExitUsage, fmt.Errorf("--secrets-file: %w", err))
		}
		p.Secret = set.Get
	}
	// A store in a bucket reports its retries as the results store does.
	ctx = blobstore.WithOptions(ctx, blobstore.OptionsOf(storeParams(ctx, "")))
	st, err := def.Create(ctx, p)
	if err != nil {
		if oe := (*credstore.OptionError)(nil); errors.As(err, &oe) {
			return nil, nil, withCode(ExitUsage, fmt.Errorf("opening the %s credential store: %w; fix its --store-option settings, or choose another store with --store (%s)", def.Name, err, strings.Join(reg.Names(), ", ")))
		}
		return nil, nil, withCode(ExitUsage, fmt.Errorf("opening the %s credential store: %w", def.Name, err))
	}
	return st, def, nil
}

// storeLocation is where a built-in store keeps its grants: the local
// store's folder, the bucket store's URL; "" for another store.
func storeLocation(st credstore.Store) string {
	switch s := st.(type) {
	case *credstore.Local:
		return s.Dir()
	case *bucketcreds.Store:
		return s.Location()
	}
	return ""
}

// storeWhere says where a store keeps its grants, for messages.
func storeWhere(st credstore.Store, def *credstore.Definition) string {
	if where := storeLocation(st); where != "" {
		return fmt.Sprintf("the %s credential store (%s)", def.Name, where)
	}
	return fmt.Sprintf("the %s credential store", def.Name)
}

type authFlags struct {
	store       storeFlags
	config      string
	secretsFile string
	noBrowser   bool
	port        int
	json        bool
	verbose     bool
}

func newAuthCmd(stdio Stdio) *cobra.Command {
	f := &authFlags{}
	cmd := &cobra.Command{
		Use:   "auth SERVER -c EVAL",
		Short: "Authorise a connector server, and list or revoke the grants kept",
		Long: `A connector server is an MCP server reached over streamable HTTP (url) that
wants an OAuth access token with every request: a hosted service's MCP endpoint,
for example. The eval config marks one with an oauth block:

  servers:
    notes:
      url: https://notes.example.com/mcp
      oauth: {}            # or: scopes, clientId, clientSecret: ${secret:NAME}

mst auth SERVER -c EVAL authorises it once, as you: it reads the server's
protected resource metadata to find its authorization server, registers mst
there as a client (dynamic client registration) unless oauth.clientId names one
registered beforehand, and opens the authorization page in your browser. When
you approve, the browser comes back to a listener of mst on
http://127.0.0.1:PORT/callback, mst exchanges the code (with PKCE) for an
access token and a refresh token, lists the server's tools with it to check it
works, and keeps the grant in the credential store (--store, by default the
local one: files encrypted at rest under ~/.config/mst/credentials, the key in
~/.local/share/mst/credentials.key). A detached run needs --store bucket: the
grants sealed in the results bucket (or --store-option url=gs://…), the key
MST_CREDENTIALS_KEY in --secrets-file (mst auth new-key makes one).

Each run's coordinator then refreshes the grant as needed and hands its workers
short-lived access tokens only; the refresh token never leaves the store's
machine.

The browser: $BROWSER if set, else xdg-open or open. With --no-browser, or
when there is none, mst prints the URL to open on any machine. If the browser
cannot reach this machine's 127.0.0.1 (it runs elsewhere), it ends on a page
that does not load: copy that page's address (or the code alone) and paste it
into mst's standard input.

A client registered beforehand must have http://127.0.0.1 (any port; --port
fixes one) as a redirect URI. Its secret comes from --secrets-file through a
${secret:NAME} reference; it is kept in the store with the grant, never in the
eval config.

  mst auth list           the grants kept, and until when their tokens hold
  mst auth revoke SERVER  remove one

` + exitCodesHelp(),
		Example: `  mst auth notes -c eval.yaml
  mst auth notes -c eval.yaml --no-browser
  mst auth notes -c eval.yaml --secrets-file ~/.config/mst/secrets.env
  mst auth notes -c eval.yaml --store bucket --secrets-file ~/.config/mst/secrets.env
  mst auth list
  mst auth revoke notes`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("mst auth takes the name of one connector server of the eval config: mst auth SERVER -c eval.yaml (or mst auth list, mst auth revoke SERVER)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuth(cmd.Context(), stdio, args[0], f)
		},
	}
	f.store.add(cmd.PersistentFlags(), stdio.parts())
	pf := cmd.PersistentFlags()
	pf.StringVarP(&f.config, "config", "c", "", "the eval config that declares the server (required to authorise one; with a bucket store, its results.store is where the grants are kept by default)")
	pf.StringVar(&f.secretsFile, "secrets-file", "", "file of KEY=value lines that sets the secrets the server's oauth.clientSecret and headers refer to, and the bucket store's key "+credstore.KeySecret)
	fl := cmd.Flags()
	fl.BoolVar(&f.noBrowser, "no-browser", false, "open no browser: print the URL, and wait for the browser to come back or for its address to be pasted on standard input")
	fl.IntVar(&f.port, "port", 0, "the port of the loopback redirect http://127.0.0.1:PORT/callback (default: any free one)")
	fl.BoolVar(&f.json, "json", false, "print the grant stored as JSON on stdout, without its tokens or client secret")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log details on stderr")
	cmd.AddCommand(newAuthListCmd(stdio, f), newAuthRevokeCmd(stdio, f), newAuthKeyCmd(stdio))
	return cmd
}

// secretRef is a whole ${secret:NAME} value.
var secretRef = regexp.MustCompile(`^\$\{secret:([A-Za-z_][A-Za-z0-9_]*)\}$`)

// connector returns the connector server named name in the config at
// path, or an error saying how to fix the config or the command.
func connector(parts *builtin.Parts, path, name string) (*eval.Config, eval.ServerConfig, error) {
	if path == "" {
		return nil, eval.ServerConfig{}, withCode(ExitUsage, fmt.Errorf("mst auth needs the eval config that declares server %q: mst auth %s -c eval.yaml", name, shellWord(name)))
	}
	cfg, err := eval.Load(path, catalog(parts))
	if err != nil {
		return nil, eval.ServerConfig{}, withCode(ExitUsage, err)
	}
	sc, ok := cfg.Servers[name]
	if !ok {
		var names []string
		for n, s := range cfg.Servers {
			if s.OAuth != nil {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		if len(names) == 0 {
			return nil, sc, withCode(ExitUsage, fmt.Errorf("%s declares no server %q, and none of its servers is a connector server (one with url and an oauth block); add one under servers (see docs/connectors.md)", path, name))
		}
		return nil, sc, withCode(ExitUsage, fmt.Errorf("%s declares no server %q; its connector servers: %s", path, name, strings.Join(names, ", ")))
	}
	if sc.URL == "" {
		return nil, sc, withCode(ExitUsage, fmt.Errorf("server %q in %s is a stdio server (command %s), which mst starts itself and needs no OAuth grant; mst auth authorises connector servers: streamable HTTP servers (url) with an oauth block", name, path, sc.Command))
	}
	if sc.OAuth == nil {
		return nil, sc, withCode(ExitUsage, fmt.Errorf("server %q in %s has no oauth block, so it is not a connector server and runs send it no OAuth token; if it takes OAuth, add `oauth: {}` under servers.%s (see docs/connectors.md)", name, path, name))
	}
	return cfg, sc, nil
}

// shellWord is s quoted for a shell when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@+=,", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// resolveAuthSecrets returns the client secret and the headers of server
// sc with their ${secret:NAME} references replaced from the secrets file.
func resolveAuthSecrets(name string, sc eval.ServerConfig, set *secrets.Set, secretsFile string) (clientSecret string, headers map[string]string, err error) {
	need := func(where, secret string) (string, error) {
		if secretsFile == "" {
			return "", withCode(ExitUsage, fmt.Errorf("servers.%s.%s refers to the secret %s: give the secrets file that sets it with --secrets-file FILE", name, where, secret))
		}
		v, ok := set.Get(secret)
		if !ok {
			return "", withCode(ExitUsage, fmt.Errorf("servers.%s.%s refers to the secret %s, which %s does not set: add a line %s=… to it", name, where, secret, secretsFile, secret))
		}
		return v, nil
	}
	if ref := sc.OAuth.ClientSecret; ref != "" {
		m := secretRef.FindStringSubmatch(ref)
		if m == nil {
			return "", nil, withCode(ExitUsage, fmt.Errorf("servers.%s.oauth.clientSecret must be a ${secret:NAME} reference to the secrets file, never the secret itself", name))
		}
		if clientSecret, err = need("oauth.clientSecret", m[1]); err != nil {
			return "", nil, err
		}
	}
	srv := servers.Server{Name: name, URL: sc.URL, Headers: sc.Headers}
	refs, err := srv.SecretRefs()
	if err != nil {
		return "", nil, withCode(ExitUsage, err)
	}
	for _, r := range refs {
		if _, err := need(r.Where, r.Name); err != nil {
			return "", nil, err
		}
	}
	resolved, err := srv.Resolve(set.Get)
	if err != nil {
		return "", nil, withCode(ExitUsage, err)
	}
	return clientSecret, resolved.Headers, nil
}

func runAuth(ctx context.Context, stdio Stdio, name string, f *authFlags) error {
	cfg, sc, err := connector(stdio.parts(), f.config, name)
	if err != nil {
		return err
	}
	f.store.secretsFile, f.store.results = f.secretsFile, cfg.Results
	if f.port < 0 || f.port > 65535 {
		return withCode(ExitUsage, fmt.Errorf("--port %d: give a port from 1 to 65535, or 0 for any free one", f.port))
	}
	set := secrets.New()
	if f.secretsFile != "" {
		if set, err = secrets.Load(f.secretsFile); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--secrets-file: %w", err))
		}
		for _, w := range set.Warnings() {
			fmt.Fprintf(stdio.Err, "mst: warning: %s\n", w)
		}
	}
	clientSecret, headers, err := resolveAuthSecrets(name, sc, set, f.secretsFile)
	if err != nil {
		return err
	}
	logger := newLogger(stdio.Err, f.verbose)
	st, def, err := f.store.open(ctx, logger)
	if err != nil {
		return err
	}

	env := envMap(stdio.Env)
	var open func(string) error
	if !f.noBrowser {
		if open = browserOpener(env, stdio.Env); open == nil {
			fmt.Fprintln(stdio.Err, "No browser to open: $BROWSER is not set and there is no xdg-open or open on PATH.")
		}
	}
	res, err := credstore.Login(ctx, credstore.LoginParams{
		Server:       name,
		URL:          sc.URL,
		Headers:      headers,
		Scopes:       sc.OAuth.Scopes,
		ClientID:     sc.OAuth.ClientID,
		ClientSecret: clientSecret,
		Port:         f.port,
		Open:         open,
		Out:          stdio.Err,
		Paste:        stdio.In,
	})
	if err != nil {
		// The SDK's messages may quote an answer; keep known secrets out.
		return withCode(ExitFailure, errors.New(secrets.NewRedactor(set).String(err.Error())))
	}
	g := res.Grant
	if err := st.WithLock(ctx, name, func(ctx context.Context) error { return st.Put(ctx, g) }); err != nil {
		return withCode(ExitFailure, fmt.Errorf("the authorization worked but storing the grant for server %q in %s failed: %w", name, storeWhere(st, def), err))
	}
	if f.json {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(g.Listing())
	}
	fmt.Fprintf(stdio.Out, "Authorised server %q: it listed %d tools with the new token.\n", name, res.Tools)
	fmt.Fprintf(stdio.Out, "The grant is kept in %s.\n", storeWhere(st, def))
	if g.Token.RefreshToken == "" {
		fmt.Fprintf(stdio.Out, "The authorization server gave no refresh token: runs can use this grant until its access token expires (%s); then run mst auth %s again.\n", when(g.Token.Expiry), shellWord(name))
	} else {
		fmt.Fprintf(stdio.Out, "Runs refresh its access token (now valid until %s) as they need.\n", when(g.Token.Expiry))
	}
	return nil
}

// when formats a time for a listing; the zero time is "-".
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04 MST")
}

// browserOpener returns how to open a URL in the user's browser: the
// commands of $BROWSER (a list separated by colons, each of which may
// place the URL with %s), else xdg-open or open; nil when there is none.
func browserOpener(env map[string]string, environ []string) func(string) error {
	var cmds [][]string
	if b := env["BROWSER"]; b != "" {
		for _, entry := range strings.Split(b, ":") {
			if fields := strings.Fields(entry); len(fields) > 0 {
				cmds = append(cmds, fields)
			}
		}
	} else {
		name := "xdg-open"
		if runtime.GOOS == "darwin" {
			name = "open"
		}
		if _, err := exec.LookPath(name); err == nil {
			cmds = append(cmds, []string{name})
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	return func(url string) error {
		var errs []error
		for _, c := range cmds {
			args := slices.Clone(c[1:])
			placed := false
			for i, a := range args {
				if strings.Contains(a, "%s") {
					args[i] = strings.ReplaceAll(a, "%s", url)
					placed = true
				}
			}
			if !placed {
				args = append(args, url)
			}
			p := exec.Command(c[0], args...)
			p.Env = environ
			p.Stdin, p.Stdout, p.Stderr = nil, io.Discard, io.Discard
			if err := p.Start(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c[0], err))
				continue
			}
			go p.Wait() // reap it; a browser may run on long after
			return nil
		}
		return errors.Join(errs...)
	}
}

func newAuthListCmd(stdio Stdio, f *authFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the connector servers' grants in the credential store",
		Long: `List the grants the credential store keeps, one per connector server: the
server's name and URL, the scopes granted, until when the access token holds,
whether there is a refresh token (without one, the grant ends with the access
token), and when it was granted and last refreshed. No token or secret is shown:
the listing never reads them out.

A run refreshes an expired access token itself; only a grant the provider
refused or revoked needs mst auth SERVER -c EVAL again.`,
		Example: `  mst auth list
  mst auth list --json | jq '.grants[] | select(.listed.refresh_token | not) | .server'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, def, err := f.openStore(cmd.Context(), stdio)
			if err != nil {
				return err
			}
			grants, listErr := st.List(cmd.Context())
			if asJSON {
				if grants == nil {
					grants = []credstore.Grant{}
				}
				enc := json.NewEncoder(stdio.Out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(struct {
					Store    string            `json:"store"`
					Location string            `json:"location,omitempty"`
					Grants   []credstore.Grant `json:"grants"`
				}{def.Name, storeLocation(st), grants}); err != nil {
					return err
				}
			} else if len(grants) == 0 && listErr == nil {
				fmt.Fprintf(stdio.Out, "No grants in %s. Authorise a connector server with mst auth SERVER -c EVAL.\n", storeWhere(st, def))
			} else {
				printGrants(stdio.Out, grants)
			}
			if listErr != nil {
				return withCode(ExitFailure, listErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the grants as JSON (without tokens or secrets)")
	return cmd
}

func printGrants(w io.Writer, grants []credstore.Grant) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tRESOURCE\tSCOPES\tACCESS TOKEN UNTIL\tREFRESH TOKEN\tGRANTED\tREFRESHED")
	now := time.Now()
	for _, g := range grants {
		until, refresh := "-", "no"
		if g.Token != nil {
			until = when(g.Token.Expiry)
			if !g.Token.Expiry.IsZero() && g.Token.Expiry.Before(now) {
				until += " (expired)"
			}
		}
		if g.Listed != nil && g.Listed.RefreshToken {
			refresh = "yes"
		}
		scopes := strings.Join(g.Scopes, " ")
		if scopes == "" {
			scopes = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Server, orDash(g.Resource), scopes, until, refresh, when(g.Granted), when(g.Refreshed))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newAuthRevokeCmd(stdio Stdio, f *authFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke SERVER",
		Short: "Remove a connector server's grant from the credential store",
		Long: `Remove the grant for SERVER from the credential store: runs then have no token
for it until mst auth SERVER -c EVAL authorises it again.

This removes mst's copy only. The provider may still consider the grant live
until its tokens expire or you revoke mst's access there (in the provider's
settings for connected apps, for example).`,
		Example: `  mst auth revoke notes`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("mst auth revoke takes the name of one server: mst auth revoke SERVER (mst auth list shows them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			st, def, err := f.openStore(cmd.Context(), stdio)
			if err != nil {
				return err
			}
			err = st.WithLock(cmd.Context(), name, func(ctx context.Context) error { return st.Delete(ctx, name) })
			if errors.Is(err, credstore.ErrNotFound) {
				var names []string
				if grants, _ := st.List(cmd.Context()); len(grants) > 0 {
					for _, g := range grants {
						names = append(names, g.Server)
					}
					return withCode(ExitFailure, fmt.Errorf("%s holds no grant for server %q; it holds grants for: %s", storeWhere(st, def), name, strings.Join(names, ", ")))
				}
				return withCode(ExitFailure, fmt.Errorf("%s holds no grant for server %q (it holds none)", storeWhere(st, def), name))
			}
			if err != nil {
				return withCode(ExitFailure, err)
			}
			fmt.Fprintf(stdio.Out, "Removed the grant for server %q from %s.\n", name, storeWhere(st, def))
			fmt.Fprintln(stdio.Out, "The provider may still consider the grant live until its tokens expire or you revoke mst's access there.")
			return nil
		},
	}
}

// openStore opens the credential store for mst auth list and revoke: the
// key from --secrets-file, the results store from -c's config.
func (f *authFlags) openStore(ctx context.Context, stdio Stdio) (credstore.Store, *credstore.Definition, error) {
	f.store.secretsFile = f.secretsFile
	if f.config != "" {
		cfg, err := eval.Load(f.config, catalog(stdio.parts()))
		if err != nil {
			return nil, nil, withCode(ExitUsage, err)
		}
		f.store.results = cfg.Results
	}
	return f.store.open(ctx, newLogger(stdio.Err, false))
}

func newAuthKeyCmd(stdio Stdio) *cobra.Command {
	return &cobra.Command{
		Use:   "new-key",
		Short: "Print a fresh key for a shared credential store, as a secrets file line",
		Long: `Print a line ` + credstore.KeySecret + `=KEY with a fresh random key (32 bytes, as hex) for
the bucket credential store, which keeps connector servers' grants encrypted in
a gs:// or s3:// bucket so that a detached run's coordinator, on another
machine, can refresh them. Append it to your secrets file once and keep that
file: grants stored with one key cannot be read with another.

mst reads the key from the secrets file only, and never gives it to a client,
a server or a worker; a detached run sends it to its coordinator with the rest
of the secrets file.`,
		Example: `  mst auth new-key >> ~/.config/mst/secrets.env
  mst auth notes -c eval.yaml --store bucket --secrets-file ~/.config/mst/secrets.env
  mst run eval.yaml --detach --store bucket --secrets-file ~/.config/mst/secrets.env`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(stdio.Out, "%s=%s\n", credstore.KeySecret, credstore.NewKey())
			return err
		},
	}
}
