// Package builtin wires MST's built-in parts into registries: the one place
// that lists them.
package builtin

import (
	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/client/api"
	"github.com/mst-eval/mst/client/chatgpt"
	"github.com/mst-eval/mst/client/claudecode"
	"github.com/mst-eval/mst/client/codexapp"
	"github.com/mst-eval/mst/client/codexcli"
	"github.com/mst-eval/mst/client/cowork"
	"github.com/mst-eval/mst/client/geminicli"
	"github.com/mst-eval/mst/credstore"
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

// CredentialStores returns a registry of the built-in credential stores,
// which keep connector servers' OAuth grants (mst auth, mst run --store).
func CredentialStores() *credstore.Registry {
	return credstore.NewRegistry(credstore.LocalDefinition())
}
