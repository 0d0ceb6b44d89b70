package clienttest

import (
	"context"
	"testing"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/engine/mcpproxy"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// For a client that takes MST's proxy (Definition.ProxiedServers), the
// suite does what the worker does: the session gets the servers' names
// only (OpenParams.Proxied), and each trial its own proxies in front of
// fresh servers (Trial.Servers, or Trial.Conns for a client that takes
// them in process). After the trial, the client's account of
// its tool calls must agree with what the servers got, and the result's
// servers and tool calls are the proxies' record, as in a transcript.

// proxiedParams is p as the worker gives it to a client that takes the
// proxy: the declarations without anything the proxy keeps to itself.
func proxiedParams(p client.OpenParams) client.OpenParams {
	names := make([]servers.Server, len(p.Servers))
	for i, s := range p.Servers {
		names[i] = s.Declaration()
	}
	p.Servers, p.Proxied = names, true
	return p
}

// proxied is a session whose trials run through MST's proxy.
type proxied struct {
	client.Session
	t    *testing.T
	host *mcpproxy.Host
	real []servers.Server
	// maxCalls is the definition's ToolCallLimit for the session's options.
	maxCalls int
	// inProcess: the definition's InProcessServers (Trial.Conns).
	inProcess bool
}

func newProxied(t *testing.T, sess client.Session, real []servers.Server, maxCalls int, inProcess bool) *proxied {
	t.Helper()
	h, err := mcpproxy.NewHost()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return &proxied{Session: sess, t: t, host: h, real: real, maxCalls: maxCalls, inProcess: inProcess}
}

// Run starts the trial's servers behind proxies, runs the trial on them,
// and checks the client's account against the proxies' record. A server
// that cannot start is Run's error, wrapping servers.ErrServer, as the
// worker records it (errored, cause server).
func (p *proxied) Run(ctx context.Context, tr client.Trial) (client.Result, error) {
	set, err := p.host.Open(ctx, p.real, mcpproxy.Options{Trial: tr.Key.String(), MaxCalls: p.maxCalls})
	if err != nil {
		return client.Result{}, err
	}
	if p.inProcess {
		tr.Conns = set.Conns()
	} else {
		tr.Servers = set.Servers()
	}
	res, runErr := p.Session.Run(ctx, tr)
	ev := set.Evidence()
	set.Close()
	// What the worker does with the evidence: the transcript's servers
	// and tool calls become the proxies' record.
	t := transcript.Transcript{ToolCalls: res.ToolCalls, Servers: res.Servers}
	mcpproxy.Merge(&t, ev, runErr == nil)
	if runErr == nil && res.Outcome.Status == transcript.Answered {
		for _, d := range t.Discrepancies {
			p.t.Errorf("through MST's proxy, the client's account of its tool calls and the servers' disagree: %s %s.%s (%s): %s", d.Kind, d.Server, d.Tool, d.Call, d.Detail)
		}
	}
	res.ToolCalls, res.Servers = t.ToolCalls, t.Servers
	return res, runErr
}
