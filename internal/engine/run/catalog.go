package run

import (
	"encoding/json"
	"fmt"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/provider"
)

// Catalog answers the eval loader's questions (eval.Catalog,
// eval.SourceCatalog, eval.PluginCatalog, eval.ClientCatalog) from a
// build's registries.
type Catalog struct {
	Clients   *client.Registry
	Providers *provider.Registry
	// Graders are the grader kinds, built in and plugins' (nil: the
	// built-in ones); Sources the dataset sources plugins add (nil: none).
	Graders *grade.Registry
	Sources *dataset.Sources
	// PluginVersions returns the version of this mst's plugin of a
	// namespace (nil: it has none).
	PluginVersions func(namespace string) (string, bool)
}

// ClientOptions returns the options schema of a client.
func (c Catalog) ClientOptions(name string) (json.RawMessage, error) {
	d, err := c.Clients.Lookup(name)
	if err != nil {
		return nil, err
	}
	return d.Options, nil
}

// ProviderNames lists the model providers.
func (c Catalog) ProviderNames() []string { return c.Providers.Names() }

// GraderSchema is the JSON Schema of one grader spec.
func (c Catalog) GraderSchema() json.RawMessage { return grade.SchemaOf(c.Graders) }

// ParseGrader checks one grader spec; a judge must name a model of a
// provider MST knows (grade.JudgeInfo.KeyVar, as judges of cases are
// checked when the plan is made).
func (c Catalog) ParseGrader(spec json.RawMessage) error {
	g, err := grade.ParseIn(c.Graders, spec)
	if err != nil || c.Providers == nil {
		return err
	}
	for _, in := range grade.Judged([]grade.Grader{g}) {
		if _, _, err := in.KeyVar(c.Providers); err != nil {
			return fmt.Errorf("%s: %w", in.Grader, err)
		}
	}
	return nil
}

// SourceOptions returns the options schema of a dataset source.
func (c Catalog) SourceOptions(name string) (json.RawMessage, error) {
	d, err := c.Sources.Lookup(name)
	if err != nil {
		return nil, err
	}
	return d.Options, nil
}

// PluginVersion returns the version of a plugin of this mst.
func (c Catalog) PluginVersion(namespace string) (string, bool) {
	if c.PluginVersions == nil {
		return "", false
	}
	return c.PluginVersions(namespace)
}

var (
	_ eval.SourceCatalog = Catalog{}
	_ eval.PluginCatalog = Catalog{}
)

// DatasetSpecs are the datasets of cfg, as package dataset reads them.
func DatasetSpecs(cfg *eval.Config) []dataset.Spec {
	specs := make([]dataset.Spec, len(cfg.Datasets))
	for i, d := range cfg.Datasets {
		specs[i] = dataset.Spec{Path: d.Path, Source: d.Source, Options: d.Options, Dir: cfg.Dir}
	}
	return specs
}

// sourceEnv gives dataset sources their credentials: the secrets file's
// values, then MST's environment.
func sourceEnv(req Request) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if req.Secrets != nil {
			if v, ok := req.Secrets.Get(name); ok {
				return v, true
			}
		}
		env := req.Env
		if req.SourceEnv != nil {
			env = req.SourceEnv
		}
		v, ok := env[name]
		return v, ok
	}
}
