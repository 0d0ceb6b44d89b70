// Package layers holds the tests that keep MST's house in order. It has
// no code of its own.
//
// TestFloors (layers_test.go) states, for each floor, what its packages
// may depend on: the ground helpers on nothing of MST's, the vocabulary
// (transcript, secrets, servers, protocol) on the ground, each contract
// (client, runner, store, grade, dataset, credstore) on the vocabulary,
// plugin on the contracts, the engine (internal/engine) on the contracts,
// and the built-ins (internal/builtin) on the contracts, never on the
// engine. Only internal/builtin, the wiring, and the command line (for
// the stores it opens by URL) import a built-in.
//
// TestPublicAPI (public_test.go) keeps the packages importable from
// outside MST equal to the API docs/plugins/README.md lists.
package layers
