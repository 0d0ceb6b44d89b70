// Package clienttest is the conformance suite of MST's clients: the api
// client's and each CLI client's package calls Run from a test (the
// desktop apps, which no fake provider reaches, have their own suite in
// internal/builtin/client/desktop/desktoptest), and a custom client
// should call it too. Like runner/runnertest it checks the contract of the
// extension point (client.Definition, client.Session) rather than one
// implementation.
//
// The doubles are fakes of servers, never mocks of the client: the model
// provider is internal/provider/providertest's HTTP server, speaking the real wire
// formats; the MCP servers are real ones, internal/testkit/testserver built as a
// program (stdio, with its failing, sleeping and many-tools modes) and the
// same server over streamable HTTP. A client that cannot pass a case says
// so in Config.Cannot, with the reason, and the case is skipped with it;
// a case that needs something missing (Go to build the test server) fails
// when CI is set.
//
// Flow of one case: start the fake provider with a script, open a session
// on the client with options pointing at it (Config.Provider), run one or
// two trials, check the Result, close the session.
package clienttest
