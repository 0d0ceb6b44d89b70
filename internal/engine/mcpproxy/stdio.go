package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mst-eval/mst/servers"
)

// The variables that tell ServeStdio (the hidden command `mst mcp-stdio`)
// which proxy to reach: a client that starts only stdio servers gets MST
// itself as its server, with these set in the server's env.
const (
	StdioURLEnv   = "MST_MCP_URL"
	StdioTokenEnv = "MST_MCP_TOKEN"
)

// StdioServers are the set's endpoints as stdio servers, for a client
// that can only start a program: mst (the program at mst, normally
// os.Executable) running its hidden mcp-stdio command, which relays
// between its stdio and the proxy. The token travels in the server's
// environment, never in its command line.
func (s *Set) StdioServers(mst string) []servers.Server {
	http := s.Servers()
	out := make([]servers.Server, len(http))
	for i, h := range http {
		tok := h.Headers["Authorization"][len("Bearer "):]
		out[i] = servers.Server{
			Name: h.Name, Command: mst, Args: []string{"mcp-stdio"},
			Env:            map[string]string{StdioURLEnv: h.URL, StdioTokenEnv: tok},
			StartupTimeout: h.StartupTimeout,
		}
	}
	return out
}

// ServeStdio relays MCP messages between in and out (a client that started
// this process as its stdio server) and the proxy at url, until either side
// ends. It passes messages as they are: the proxy does all the work.
func ServeStdio(ctx context.Context, url, token string, in io.Reader, out io.Writer) error {
	if url == "" || token == "" {
		return fmt.Errorf("mst mcp-stdio relays a stdio MCP client to MST's proxy, and is started by MST itself: %s and %s must be set", StdioURLEnv, StdioTokenEnv)
	}
	up, err := (&mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}},
	}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("reaching MST's proxy: %w", err)
	}
	defer up.Close()
	down, err := (&mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopCloser{out}}).Connect(ctx)
	if err != nil {
		return err
	}
	defer down.Close()
	errs := make(chan error, 2)
	pump := func(from, to mcp.Connection) {
		for {
			msg, err := from.Read(ctx)
			if err != nil {
				errs <- err
				return
			}
			if err := to.Write(ctx, msg); err != nil {
				errs <- err
				return
			}
		}
	}
	go pump(down, up)
	go pump(up, down)
	err = <-errs
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
