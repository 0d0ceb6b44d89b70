// Package builtin wires MST's built-in parts, and the plugins of a build,
// into registries: the one place that lists them.
package builtin

import (
	"context"
	"sync"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/client/api"
	"github.com/mst-eval/mst/client/chatgpt"
	"github.com/mst-eval/mst/client/claudecode"
	"github.com/mst-eval/mst/client/codexapp"
	"github.com/mst-eval/mst/client/codexcli"
	"github.com/mst-eval/mst/client/cowork"
	"github.com/mst-eval/mst/client/geminicli"
	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/plugin"
	"github.com/mst-eval/mst/provider"
	"github.com/mst-eval/mst/provider/anthropic"
	"github.com/mst-eval/mst/provider/google"
	"github.com/mst-eval/mst/provider/offline"
	"github.com/mst-eval/mst/provider/openai"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/runner/docker"
	"github.com/mst-eval/mst/runner/kubernetes"
	sshrunner "github.com/mst-eval/mst/runner/ssh"
)

// Parts are the registries of one mst process: the built-ins and what its
// plugins add, each under its full name (acme/runner/cloud-vm). Program
// plugins are started only by Graders and Sources, the two kinds they can
// add. Its methods may be called from any goroutine.
type Parts struct {
	Plugins *plugin.Installed

	once      sync.Once
	providers *provider.Registry
	clients   *client.Registry
	runners   *runner.Registry
	creds     *credstore.Registry

	loadOnce sync.Once
	graders  *grade.Registry
	sources  *dataset.Sources
}

// New returns the parts of a build with the compiled-in plugins, finding
// program plugins on searchPath (MST_PLUGIN_PATH's value).
func New(compiled []plugin.Plugin, searchPath, mstVersion string) *Parts {
	return &Parts{Plugins: plugin.Install(compiled, searchPath, mstVersion)}
}

// Builtin returns the parts of a build with no plugins.
func Builtin() *Parts { return New(nil, "", "") }

func (p *Parts) build() {
	p.once.Do(func() {
		p.providers = provider.NewRegistry(
			anthropic.Definition(),
			openai.Definition(),
			google.Definition(),
			offline.Definition(),
		)
		p.clients = client.NewRegistry(
			api.Definition(p.providers),
			claudecode.Definition(),
			codexcli.Definition(),
			geminicli.Definition(),
			cowork.Definition(),
			chatgpt.Definition(),
			codexapp.Definition(),
		)
		p.runners = runner.NewRegistry(
			runner.LocalDefinition(),
			runner.ProcessesDefinition(),
			sshrunner.Definition(), sshrunner.GcloudDefinition(),
			docker.Definition(),
			kubernetes.Definition(),
		)
		p.creds = credstore.NewRegistry(credstore.LocalDefinition())
		for _, pl := range p.Plugins.Compiled() {
			for _, d := range pl.Clients {
				c := *d
				c.Name = plugin.FullName(pl.Namespace, plugin.KindClient, d.Name)
				p.clients.Add(&c)
			}
			for _, d := range pl.Runners {
				r := *d
				r.Name = plugin.FullName(pl.Namespace, plugin.KindRunner, d.Name)
				p.runners.Add(&r)
			}
			for _, d := range pl.CredentialStores {
				s := *d
				s.Name = plugin.FullName(pl.Namespace, plugin.KindCredentialStore, d.Name)
				p.creds.Add(&s)
			}
		}
	})
}

// Providers returns the model providers.
func (p *Parts) Providers() *provider.Registry { p.build(); return p.providers }

// Clients returns the clients.
func (p *Parts) Clients() *client.Registry { p.build(); return p.clients }

// Runners returns the runners.
func (p *Parts) Runners() *runner.Registry { p.build(); return p.runners }

// CredentialStores returns the credential stores, which keep connector
// servers' OAuth grants (mst auth, mst run --store).
func (p *Parts) CredentialStores() *credstore.Registry { p.build(); return p.creds }

func (p *Parts) load(ctx context.Context) {
	p.loadOnce.Do(func() {
		var gs []*grade.Definition
		var ss []*dataset.SourceDefinition
		for _, pl := range p.Plugins.Load(ctx) {
			for _, d := range pl.Graders {
				g := *d
				g.Name = plugin.FullName(pl.Namespace, plugin.KindGrader, d.Name)
				gs = append(gs, &g)
			}
			for _, d := range pl.DatasetSources {
				s := *d
				s.Name = plugin.FullName(pl.Namespace, plugin.KindDataset, d.Name)
				ss = append(ss, &s)
			}
		}
		p.graders = grade.NewRegistry(gs...)
		p.sources = dataset.NewSources(ss...)
	})
}

// Graders returns the graders plugins add (the built-in ones are always
// there), starting program plugins on the first call.
func (p *Parts) Graders(ctx context.Context) *grade.Registry { p.load(ctx); return p.graders }

// Sources returns the dataset sources plugins add, starting program
// plugins on the first call.
func (p *Parts) Sources(ctx context.Context) *dataset.Sources { p.load(ctx); return p.sources }

// Close stops the program plugins that were started.
func (p *Parts) Close() error { return p.Plugins.Close() }

// The registries of a build with no plugins, for tests and tools that
// need no plugin.

// Clients returns the built-in clients.
func Clients() *client.Registry { return Builtin().Clients() }

// Providers returns the built-in model providers.
func Providers() *provider.Registry { return Builtin().Providers() }

// Runners returns the built-in runners.
func Runners() *runner.Registry { return Builtin().Runners() }

// CredentialStores returns the built-in credential stores.
func CredentialStores() *credstore.Registry { return Builtin().CredentialStores() }
