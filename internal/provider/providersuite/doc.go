// Package providersuite is the conformance suite of MST's model providers
// (provider.Definition and provider.Provider): each built-in provider's
// package calls Run from a test with its definition, and a provider a
// custom build of mst adds should too. Like client/clienttest and
// grade/gradertest it checks the contract of the extension point, as
// internal/provider states it, rather than one implementation: answers and
// usage come back whole, tool calls and results go both ways in the wire
// format's own shape, 429 and 5xx are retried with backoff and then given
// up as a *provider.Error, other refusals are not retried, a cancelled or
// expired context ends Complete promptly and closes its connection, an
// answer cut short is an error, and Complete may run on many goroutines
// at once. The cases, and what each checks, are the constants of Case.
//
// The doubles are fakes of servers, never mocks of the provider: the model
// is internal/provider/providertest's HTTP server, speaking the real wire
// formats (Anthropic Messages, OpenAI Responses and Chat Completions) and
// following a script; the provider's own SDK and HTTP client are real.
// Between the two sits a small proxy of the suite's own, which reports when
// a request arrives and when its connection closes (the events the
// cancellation cases wait on: the suite never sleeps to let something
// happen), when each answer was written (for the backoff), and can take
// retry-after headers out of answers or cut answers short. What reached
// the server is read back from the recorded request bodies, by format
// (wire.go), and compared with the provider.Request that was sent.
//
// A provider that makes no HTTP requests (the offline model) is run
// without Config.BaseURL: the cases that need the server do not apply, and
// the others check what any model must do (text or calls that name
// offered tools, usage counted, the same answer from many goroutines at
// once, a cancelled context honoured). A provider that cannot pass a case
// says so in Config.Cannot, with the reason: the case still runs and must
// still fail, so the entry goes once the provider is fixed.
//
// Call it from a test of the provider's package:
//
//	func TestConformance(t *testing.T) {
//		t.Parallel()
//		providersuite.Run(t, providersuite.Config{
//			Definition: anthropic.Definition(),
//			Model:      "claude-test",
//			Options:    provider.Options{APIKey: "test-key"},
//			BaseURL:    func(url string) string { return url },
//		})
//	}
//
// Every case runs as a parallel subtest; a whole run takes a few seconds,
// most of it the backoffs the providers wait for by design.
package providersuite
