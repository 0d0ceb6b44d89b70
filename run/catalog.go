package run

import (
	"encoding/json"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/provider"
)

// Catalog answers the eval loader's questions (eval.Catalog) from a build's
// registries and the graders.
type Catalog struct {
	Clients   *client.Registry
	Providers *provider.Registry
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
func (Catalog) GraderSchema() json.RawMessage { return grade.Schema() }

// ParseGrader checks one grader spec.
func (Catalog) ParseGrader(spec json.RawMessage) error {
	_, err := grade.Parse(spec)
	return err
}
