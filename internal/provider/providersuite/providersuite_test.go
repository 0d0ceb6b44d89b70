package providersuite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/provider/anthropic"
	"github.com/mst-eval/mst/internal/builtin/provider/offline"
	"github.com/mst-eval/mst/internal/provider"
)

// completeFunc is a Provider made of a function.
type completeFunc func(ctx context.Context, req provider.Request) (provider.Response, error)

func (f completeFunc) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	return f(ctx, req)
}

// broken returns def with each provider it builds wrapped by wrap, and
// with the options New receives changed by opts (when not nil).
func broken(def *provider.Definition, opts func(*provider.Options), wrap func(p provider.Provider, o provider.Options) provider.Provider) *provider.Definition {
	d := *def
	d.New = func(model string, o provider.Options) (provider.Provider, error) {
		if opts != nil {
			opts(&o)
		}
		p, err := def.New(model, o)
		if err != nil || wrap == nil {
			return p, err
		}
		return wrap(p, o), nil
	}
	return &d
}

// changeResponse wraps a provider so that its answers pass through f.
func changeResponse(f func(provider.Response) provider.Response) func(provider.Provider, provider.Options) provider.Provider {
	return func(p provider.Provider, _ provider.Options) provider.Provider {
		return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
			resp, err := p.Complete(ctx, req)
			return f(resp), err
		})
	}
}

// changeRequest wraps a provider so that its requests pass through f.
func changeRequest(f func(provider.Request) provider.Request) func(provider.Provider, provider.Options) provider.Provider {
	return func(p provider.Provider, _ provider.Options) provider.Provider {
		return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
			return p.Complete(ctx, f(req))
		})
	}
}

// changeError wraps a provider so that its errors pass through f.
func changeError(f func(provider.Response, error) (provider.Response, error)) func(provider.Provider, provider.Options) provider.Provider {
	return func(p provider.Provider, _ provider.Options) provider.Provider {
		return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
			resp, err := p.Complete(ctx, req)
			if err != nil {
				return f(resp, err)
			}
			return resp, nil
		})
	}
}

func scripted(def *provider.Definition) Config {
	return Config{
		Definition: def,
		Model:      "claude-test",
		Options:    provider.Options{APIKey: "test-key"},
		BaseURL:    func(url string) string { return url },
		Within:     time.Second,
	}
}

func unscripted(def *provider.Definition) Config {
	return Config{Definition: def, Within: time.Second}
}

// statusOf is the status of a *provider.Error, or 0.
func statusOf(err error) int {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.Status
	}
	return 0
}

// TestCasesCanFail runs each case on a provider broken in the way the case
// is there to catch, and checks that the case reports it.
func TestCasesCanFail(t *testing.T) {
	t.Parallel()
	an, off := anthropic.Definition(), offline.Definition()
	tests := []struct {
		name string
		cfg  Config
		c    Case
		want string // in one of the problems
	}{
		{
			name: "a name with a capital",
			cfg:  scripted(func() *provider.Definition { d := *an; d.Name = "Anthropic"; return &d }()),
			c:    DefinitionData, want: "lowercase",
		},
		{
			name: "Appends that do not match the requests",
			cfg:  scripted(func() *provider.Definition { d := *an; d.Appends = []string{"/v2/messages"}; return &d }()),
			c:    DefinitionData, want: "followed by one of Appends",
		},
		{
			name: "usage dropped",
			cfg:  scripted(broken(an, nil, changeResponse(func(r provider.Response) provider.Response { r.Usage = provider.Usage{}; return r }))),
			c:    Text, want: "Usage",
		},
		{
			name: "system prompt dropped",
			cfg:  scripted(broken(an, nil, changeRequest(func(r provider.Request) provider.Request { r.System = ""; return r }))),
			c:    Text, want: "system prompt",
		},
		{
			name: "call ids dropped",
			cfg: scripted(broken(an, nil, changeResponse(func(r provider.Response) provider.Response {
				for i := range r.ToolCalls {
					r.ToolCalls[i].ID = ""
				}
				return r
			}))),
			c: ToolCall, want: "ID is empty",
		},
		{
			name: "the error flag of tool results dropped",
			cfg: scripted(broken(an, nil, changeRequest(func(r provider.Request) provider.Request {
				msgs := append([]provider.Message(nil), r.Messages...)
				for i := range msgs {
					res := append([]provider.ToolResult(nil), msgs[i].ToolResults...)
					for j := range res {
						res[j].IsError = false
					}
					msgs[i].ToolResults = res
				}
				r.Messages = msgs
				return r
			}))),
			c: ToolResults, want: "IsError",
		},
		{
			name: "tool descriptions dropped",
			cfg: scripted(broken(an, nil, changeRequest(func(r provider.Request) provider.Request {
				tools := append([]provider.Tool(nil), r.Tools...)
				for i := range tools {
					tools[i].Description = ""
				}
				r.Tools = tools
				return r
			}))),
			c: Tools, want: "reached the server as",
		},
		{
			name: "a default of 1000 tokens",
			cfg: scripted(broken(an, nil, changeRequest(func(r provider.Request) provider.Request {
				if r.MaxTokens == 0 {
					r.MaxTokens = 1000
				}
				return r
			}))),
			c: MaxTokens, want: "want 4096",
		},
		{
			name: "a provider that remembers the last conversation",
			cfg: scripted(broken(an, nil, func(p provider.Provider, _ provider.Options) provider.Provider {
				var mu sync.Mutex
				var last []provider.Message
				return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
					mu.Lock()
					before := last
					last = append(append([]provider.Message(nil), before...), req.Messages...)
					mu.Unlock()
					if len(before) > 0 {
						req.Messages = append(append([]provider.Message(nil), before...), req.Messages...)
					}
					return p.Complete(ctx, req)
				})
			})),
			c: Stateless, want: "differs",
		},
		{
			name: "no retries whatever MaxRetries says",
			cfg:  scripted(broken(an, func(o *provider.Options) { o.MaxRetries = 0 }, nil)),
			c:    Retry, want: "want the answer after the retries",
		},
		{
			name: "the status lost",
			cfg: scripted(broken(an, nil, changeError(func(r provider.Response, err error) (provider.Response, error) {
				return r, fmt.Errorf("it failed: %v", err)
			}))),
			c: GiveUp, want: "want a *provider.Error",
		},
		{
			name: "a 4xx retried",
			cfg: scripted(broken(an, nil, func(p provider.Provider, _ provider.Options) provider.Provider {
				return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
					resp, err := p.Complete(ctx, req)
					if s := statusOf(err); s >= 400 && s < 500 {
						resp, err = p.Complete(ctx, req)
					}
					return resp, err
				})
			})),
			c: NoRetry, want: "not worth a retry",
		},
		{
			name: "a 429 retried at once",
			cfg: scripted(broken(an, func(o *provider.Options) { o.MaxRetries = 0 }, func(p provider.Provider, _ provider.Options) provider.Provider {
				return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
					resp, err := p.Complete(ctx, req)
					if statusOf(err) == 429 {
						resp, err = p.Complete(ctx, req)
					}
					return resp, err
				})
			})),
			c: Backoff, want: "a rate-limited provider needs a pause",
		},
		{
			name: "cancel ignored",
			cfg:  scripted(broken(an, nil, changeCtx(context.WithoutCancel))),
			c:    Cancel, want: "did not return within",
		},
		{
			name: "deadline ignored",
			cfg:  scripted(broken(an, nil, changeCtx(context.WithoutCancel))),
			c:    Deadline, want: "did not return within",
		},
		{
			name: "cancel mid-answer ignored",
			cfg:  scripted(broken(an, nil, changeCtx(context.WithoutCancel))),
			c:    Stall, want: "did not return within",
		},
		{
			name: "a network error retried over the SDK's own retries",
			cfg: scripted(broken(an, nil, func(p provider.Provider, _ provider.Options) provider.Provider {
				return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
					resp, err := p.Complete(ctx, req)
					if err != nil && statusOf(err) == 0 {
						resp, err = p.Complete(ctx, req)
					}
					return resp, err
				})
			})),
			c: Reset, want: "the retry budget bounds the whole Complete",
		},
		{
			name: "a cancelled context ignored",
			cfg:  scripted(broken(an, nil, changeCtx(context.WithoutCancel))),
			c:    Cancelled, want: "want an error that wraps context.Canceled",
		},
		{
			name: "a cut answer passed off as whole",
			cfg: scripted(broken(an, nil, changeError(func(provider.Response, error) (provider.Response, error) {
				return provider.Response{Text: "The ans"}, nil
			}))),
			c: Cut, want: "want an error, not part of an answer",
		},
		{
			name: "a truncated answer passed off as whole",
			cfg: scripted(broken(an, nil, changeError(func(provider.Response, error) (provider.Response, error) {
				return provider.Response{Text: "The ans"}, nil
			}))),
			c: Truncated, want: "want an error, not the part that came",
		},
		{
			name: "a network error dressed as an answer",
			cfg: scripted(broken(an, nil, changeError(func(r provider.Response, err error) (provider.Response, error) {
				return r, &provider.Error{Provider: "anthropic", Message: err.Error()}
			}))),
			c: Down, want: "a *provider.Error",
		},
		{
			name: "callers serialized",
			cfg: scripted(broken(an, nil, func(p provider.Provider, _ provider.Options) provider.Provider {
				var mu sync.Mutex
				return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
					mu.Lock()
					defer mu.Unlock()
					return p.Complete(ctx, req)
				})
			})),
			c: Concurrent, want: "must not serialize",
		},
		{
			name: "a key made up",
			cfg: scripted(broken(an, func(o *provider.Options) {
				if o.APIKey == "" {
					o.APIKey = "made-up"
				}
			}, nil)),
			c: MissingKey, want: "want an error naming ANTHROPIC_API_KEY",
		},
		{
			name: "unscripted: a call of a tool never offered",
			cfg: unscripted(broken(off, nil, changeResponse(func(r provider.Response) provider.Response {
				r.ToolCalls = append(r.ToolCalls, provider.ToolCall{ID: "x", Name: "rm_rf", Arguments: []byte(`{}`)})
				return r
			}))),
			c: ToolCall, want: "was not offered",
		},
		{
			name: "unscripted: a call with no tools offered",
			cfg: unscripted(broken(off, nil, changeResponse(func(r provider.Response) provider.Response {
				r.ToolCalls = append(r.ToolCalls, provider.ToolCall{ID: "x", Name: "echo", Arguments: []byte(`{}`)})
				return r
			}))),
			c: Text, want: "no tools were offered",
		},
		{
			name: "unscripted: a different answer each time",
			cfg:  unscripted(broken(off, nil, counting())),
			c:    Concurrent, want: "differs from a lone call",
		},
		{
			name: "unscripted: state kept between calls",
			cfg:  unscripted(broken(off, nil, counting())),
			c:    Stateless, want: "different answers",
		},
		{
			name: "unscripted: a cancelled context ignored",
			cfg:  unscripted(broken(off, nil, changeCtx(context.WithoutCancel))),
			c:    Cancelled, want: "want an error that wraps context.Canceled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := newSuite(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if why := s.notApplicable(tt.c); why != "" {
				t.Fatalf("%s does not apply: %s", tt.c, why)
			}
			problems := s.run(t, tt.c)
			for _, p := range problems {
				if strings.Contains(p.Error(), tt.want) {
					t.Logf("%s reports: %v", tt.c, p)
					return
				}
			}
			t.Errorf("case %s reported %d problems, none with %q:\n%v", tt.c, len(problems), tt.want, errors.Join(problems...))
		})
	}
}

// changeCtx wraps a provider so that its context passes through f.
func changeCtx(f func(context.Context) context.Context) func(provider.Provider, provider.Options) provider.Provider {
	return func(p provider.Provider, _ provider.Options) provider.Provider {
		return completeFunc(func(ctx context.Context, req provider.Request) (provider.Response, error) {
			return p.Complete(f(ctx), req)
		})
	}
}

// counting wraps a provider so that every answer carries a new number.
func counting() func(provider.Provider, provider.Options) provider.Provider {
	var n atomic.Int64
	return changeResponse(func(r provider.Response) provider.Response {
		r.Text += fmt.Sprintf(" (%d)", n.Add(1))
		return r
	})
}

func TestConfigChecks(t *testing.T) {
	t.Parallel()
	an := anthropic.Definition()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no definition", Config{}, "needs New"},
		{"no New", Config{Definition: &provider.Definition{Name: "x"}}, "needs New"},
		{"a reason missing", Config{Definition: an, Cannot: map[Case]string{Cut: " "}}, "has no reason"},
		{"an unknown case", Config{Definition: an, Cannot: map[Case]string{"nope": "why"}}, "unknown case"},
	} {
		_, err := newSuite(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: newSuite() error = %v, want one with %q", tc.name, err, tc.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		sse  bool
		want string
	}{
		{"event: a\ndata: 1\n\nevent: b\ndata: 2\n\nevent: c\ndata: 3\n\nevent: d\ndata: 4\n\n", true, "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n"},
		{"data: 1\n\ndata: 2\n\ndata: 3\n\n", true, "data: 1\n\n"},
		{`{"a":"bcdefg"}`, false, `{"a":"b`},
	} {
		if got := string(truncate([]byte(tc.in), tc.sse)); got != tc.want {
			t.Errorf("truncate(%q, %v) = %q, want %q", tc.in, tc.sse, got, tc.want)
		}
	}
}
