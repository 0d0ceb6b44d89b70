// Package builtin wires MST's built-in parts into registries: the one place
// that lists them.
package builtin

import (
	"encoding/json"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/client/api"
	"github.com/mst-eval/mst/grade"
)

// Clients returns a registry of the built-in clients.
func Clients() *client.Registry {
	return client.NewRegistry(
		api.Definition(),
	)
}

// Catalog answers the eval loader's questions from a client registry and
// the built-in graders.
type Catalog struct {
	Clients *client.Registry
}

// ClientOptions returns the options schema of a client.
func (c Catalog) ClientOptions(name string) (json.RawMessage, error) {
	d, err := c.Clients.Lookup(name)
	if err != nil {
		return nil, err
	}
	return d.Options, nil
}

// GraderSchema is the JSON Schema of one grader spec.
func (Catalog) GraderSchema() json.RawMessage { return grade.Schema() }

// ParseGrader checks one grader spec.
func (Catalog) ParseGrader(spec json.RawMessage) error {
	_, err := grade.Parse(spec)
	return err
}
