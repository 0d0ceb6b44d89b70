package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mst-eval/mst/client"
)

// ClientSetupEnv names the variable a runner sets on the machines it makes
// for workers (a container, a pod) to say how a client's program gets onto
// such a machine, which the client's own setup command (npm install -g …)
// does not say: a sentence in which {client} stands for the client's name,
// such as "build an image that has it with `mst runner setup docker --with
// {client}`". A worker whose client preflight fails adds it to the error.
// Runners cannot import this package, so each spells the name itself.
const ClientSetupEnv = "MST_CLIENT_SETUP"

// preflight runs the client's preflight (def.Preflight, when it has one)
// on this machine for a setting's client options. When it fails on a
// machine whose runner said how to set clients up there (ClientSetupEnv),
// the error says that too.
func preflight(def *client.Definition, options json.RawMessage) error {
	if def.Preflight == nil {
		return nil
	}
	err := def.Preflight(options)
	if err == nil {
		return nil
	}
	if hint := strings.TrimSpace(os.Getenv(ClientSetupEnv)); hint != "" && !errors.Is(err, client.ErrMachineSetup) {
		return fmt.Errorf("%w; %s", err, strings.ReplaceAll(hint, "{client}", def.Name))
	}
	return err
}
