package provider_test

import (
	"sync"
	"testing"

	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/builtin/provider/openai"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/internal/provider/providertest"
)

// TestConnectionsPooled sends 200 requests, 20 at a time, through each
// wire format to the fake provider: the connections opened stay near the
// concurrency (Go's default idle pool of 2 per host opened about 130).
func TestConnectionsPooled(t *testing.T) {
	const requests, concurrency = 200, 20
	for _, c := range []struct {
		name string
		make func(url string) (provider.Provider, error)
	}{
		{"anthropic", func(url string) (provider.Provider, error) {
			return anthropic.New("claude-test", provider.Options{APIKey: "k", BaseURL: url, MaxRetries: 0})
		}},
		{"openai responses", func(url string) (provider.Provider, error) {
			return openai.New("gpt-test", provider.Options{APIKey: "k", BaseURL: url + "/v1", MaxRetries: 0})
		}},
		{"openai chat", func(url string) (provider.Provider, error) {
			return openai.New("gpt-test", provider.Options{APIKey: "k", BaseURL: url + "/v1", API: openai.APIChat, MaxRetries: 0})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := providertest.New(t, providertest.Script{Conversations: []providertest.Conversation{
				{Match: "hello", Turns: []providertest.Turn{{Text: "hi"}}},
			}})
			work := make(chan int)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var errs []error
			for range concurrency {
				wg.Go(func() {
					// A provider per trial, as the api client makes them.
					for range work {
						p, err := c.make(srv.URL)
						if err == nil {
							_, err = p.Complete(t.Context(), provider.Request{Messages: []provider.Message{{Role: provider.User, Text: "hello"}}})
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
						}
					}
				})
			}
			for i := range requests {
				work <- i
			}
			close(work)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d requests failed, the first: %v", len(errs), errs[0])
			}
			n := srv.Connections()
			t.Logf("%d requests at concurrency %d opened %d connections", requests, concurrency, n)
			if n > 2*concurrency {
				t.Errorf("%d requests at concurrency %d opened %d connections; want them reused, at most %d", requests, concurrency, n, 2*concurrency)
			}
		})
	}
}
