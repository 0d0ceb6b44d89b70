// Package builtin wires MST's built-in parts into registries: the one place
// that lists them.
package builtin

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/client/api"
	"github.com/mst-eval/mst/client/chatgpt"
	"github.com/mst-eval/mst/client/claudecode"
	"github.com/mst-eval/mst/client/codexapp"
	"github.com/mst-eval/mst/client/codexcli"
	"github.com/mst-eval/mst/client/cowork"
	"github.com/mst-eval/mst/client/geminicli"
	"github.com/mst-eval/mst/grade"
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

// Clients returns a registry of the built-in clients.
func Clients() *client.Registry {
	return client.NewRegistry(
		api.Definition(Providers()),
		claudecode.Definition(),
		codexcli.Definition(),
		geminicli.Definition(),
		cowork.Definition(),
		chatgpt.Definition(),
		codexapp.Definition(),
	)
}

// Providers returns a registry of the built-in model providers.
func Providers() *provider.Registry {
	return provider.NewRegistry(
		anthropic.Definition(),
		openai.Definition(),
		google.Definition(),
		offline.Definition(),
	)
}

// CheckClient reports whether the client named name can run on goos (a
// GOOS value) in this build. It returns, in this order: the registry's
// error for an unknown name; an error naming the client's operating systems
// when its requirements do not include goos; the client's own Available
// error. A client that lists no OS runs on any.
func CheckClient(reg *client.Registry, name, goos string) error {
	d, err := reg.Lookup(name)
	if err != nil {
		return err
	}
	if oses := d.Requirements.OS; len(oses) > 0 && !slices.Contains(oses, goos) {
		names := make([]string, len(oses))
		for i, o := range oses {
			names[i] = OSName(o)
		}
		return fmt.Errorf("client %s runs on %s; this run's machine is %s", name, strings.Join(names, ", "), OSName(goos))
	}
	if d.Available != nil {
		return d.Available(goos)
	}
	return nil
}

// OSName returns the name people use for a GOOS value: "macos" for darwin,
// the value itself otherwise.
func OSName(goos string) string {
	if goos == "darwin" {
		return "macos"
	}
	return goos
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

// ProviderNames lists the built-in model providers.
func (Catalog) ProviderNames() []string { return Providers().Names() }

// GraderSchema is the JSON Schema of one grader spec.
func (Catalog) GraderSchema() json.RawMessage { return grade.Schema() }

// ParseGrader checks one grader spec.
func (Catalog) ParseGrader(spec json.RawMessage) error {
	_, err := grade.Parse(spec)
	return err
}

// Runners returns a registry of the built-in runners.
func Runners() *runner.Registry {
	return runner.NewRegistry(
		runner.LocalDefinition(),
		runner.ProcessesDefinition(),
		sshrunner.Definition(), sshrunner.GcloudDefinition(),
		docker.Definition(),
		kubernetes.Definition(),
	)
}
