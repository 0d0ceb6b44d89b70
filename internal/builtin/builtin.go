// Package builtin wires MST's built-in parts, and the plugins of a build,
// into registries: the one place that lists them.
package builtin

import (
	"context"
	"sync"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/builtin/client/api"
	"github.com/mst-eval/mst/internal/builtin/client/chatgpt"
	"github.com/mst-eval/mst/internal/builtin/client/claudecode"
	"github.com/mst-eval/mst/internal/builtin/client/codexapp"
	"github.com/mst-eval/mst/internal/builtin/client/codexcli"
	"github.com/mst-eval/mst/internal/builtin/client/cowork"
	"github.com/mst-eval/mst/internal/builtin/client/geminicli"
	"github.com/mst-eval/mst/internal/builtin/credstore/bucketcreds"
	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/builtin/provider/google"
	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/builtin/provider/openai"
	"github.com/mst-eval/mst/internal/builtin/runner/docker"
	"github.com/mst-eval/mst/internal/builtin/runner/kubernetes"
	sshrunner "github.com/mst-eval/mst/internal/builtin/runner/ssh"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/plugin"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/store"
)

// Parts are the registries of one mst process: the built-ins and what its
// plugins add, each under its full name (acme/runner/cloud-vm). Program
// plugins are started only by Clients, Graders and Sources, the kinds they
// can add. Its methods may be called from any goroutine.
type Parts struct {
	Plugins *plugin.Installed

	once      sync.Once
	providers *provider.Registry
	clients   *client.Registry
	runners   *runner.Registry
	creds     *credstore.Registry
	stores    *store.Registry

	clientsOnce sync.Once

	loadOnce sync.Once
	sources  []*dataset.SourceDefinition
	graders  []*grade.Definition
	lazyG    *grade.Registry
	lazyS    *dataset.Sources
}

// New returns the parts of a build with the compiled-in plugins, finding
// program plugins on searchPath (MST_PLUGIN_PATH's value).
func New(compiled []plugin.Plugin, searchPath, mstVersion string) *Parts {
	p := &Parts{Plugins: plugin.Install(compiled, searchPath, mstVersion)}
	p.lazyG = grade.NewLazyRegistry(func() []*grade.Definition {
		p.load(context.Background())
		return p.graders
	})
	p.lazyS = dataset.NewLazySources(func() []*dataset.SourceDefinition {
		p.load(context.Background())
		return p.sources
	})
	return p
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
		p.creds = credstore.NewRegistry(credstore.LocalDefinition(), bucketcreds.Definition())
		p.stores = store.NewRegistry(append([]*store.Definition{store.DirDefinition()}, blobstore.Definitions()...)...)
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

// Clients returns the clients, those of program plugins included: the
// first call starts the program plugins.
func (p *Parts) Clients() *client.Registry {
	p.build()
	p.clientsOnce.Do(func() {
		for _, pl := range p.Plugins.Load(context.Background()) {
			if _, ok := p.Plugins.Program(pl.Namespace); !ok {
				continue // compiled in: registered by build
			}
			for _, d := range pl.Clients {
				c := *d
				c.Name = plugin.FullName(pl.Namespace, plugin.KindClient, d.Name)
				p.clients.Add(&c)
			}
		}
	})
	return p.clients
}

// Runners returns the runners.
func (p *Parts) Runners() *runner.Registry { p.build(); return p.runners }

// CredentialStores returns the credential stores, which keep connector
// servers' OAuth grants (mst auth, mst run --store).
func (p *Parts) CredentialStores() *credstore.Registry { p.build(); return p.creds }

// ResultStores returns the result stores by URL scheme: a folder (file)
// and the buckets (gs, s3).
func (p *Parts) ResultStores() *store.Registry { p.build(); return p.stores }

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
		p.graders = gs
		p.sources = ss
	})
}

// Graders returns the graders plugins add (the built-in ones are always
// there). Program plugins start when a grader is first looked up.
func (p *Parts) Graders() *grade.Registry { return p.lazyG }

// Sources returns the dataset sources plugins add. Program plugins start
// when a source is first looked up.
func (p *Parts) Sources() *dataset.Sources { return p.lazyS }

// PluginVersion returns the version of the plugin of a namespace, starting
// a program plugin if that is what provides it.
func (p *Parts) PluginVersion(namespace string) (string, bool) {
	if v, ok := p.Plugins.Versions(context.Background(), nil)[namespace]; ok {
		return v, true
	}
	if _, ok := p.Plugins.Program(namespace); !ok {
		return "", false
	}
	v, ok := p.Plugins.Versions(context.Background(), []string{namespace})[namespace]
	return v, ok
}

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

// ShardPlugins returns the versions a shard's workers must match: every
// compiled-in plugin, and the program plugins of namespaces this process
// has (shard.PluginVersions).
func (p *Parts) ShardPlugins(namespaces []string) map[string]string {
	out := p.Plugins.Versions(context.Background(), nil)
	var programs []string
	for _, ns := range namespaces {
		if _, ok := out[ns]; ok {
			continue
		}
		if _, ok := p.Plugins.Program(ns); ok {
			programs = append(programs, ns)
		}
	}
	if len(programs) > 0 {
		for ns, v := range p.Plugins.Versions(context.Background(), programs) {
			out[ns] = v
		}
	}
	return out
}
