// Package client is an example Go plugin that adds one client kind,
// acme-bots/client/echo-agent: an "agent" with no model. For each trial it
// connects to the trial's MCP servers with the official MCP Go SDK, lists
// their tools, calls one tool picked from the prompt's words, and answers
// with the tool's text.
//
// It shows a run-only client (Definition.Run) that takes MST's proxy
// (ProxiedServers): the worker puts a proxy in front of every server for
// every trial and hands the trial the proxies as streamable-HTTP servers
// (Trial.Servers), so tool variants, dry runs, faults and the server-side
// record of tool calls work for it as for MST's own clients.
//
// The rules, deterministic so that evals of a server can use it as a
// baseline:
//
//   - the tool is the first one, in server and listing order, whose name
//     holds (ignoring case) the first word of the prompt, of at least 4
//     letters, that any tool's name holds; with no such word, the first
//     tool;
//   - its arguments are its input schema's required properties: a string
//     gets the prompt's quoted text ('…' or "…") or else its last word, a
//     number or integer the prompt's first number;
//   - the answer is the tool's text result; a tool's error result is
//     answered with "The tool failed: " and its text.
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mstclient "github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/plugin"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// Version is the client's version, in its transcripts.
const Version = "1.0.0"

// Plugin is the acme plugin with its one client.
func Plugin() plugin.Plugin {
	return plugin.Plugin{
		Namespace:   "acme-bots",
		Version:     Version,
		Description: "Example client: calls one tool picked from the prompt and answers with its result.",
		Module:      "example.com/mst-plugins/client",
		Clients:     []*mstclient.Definition{Definition()},
	}
}

// Definition is the echo-agent client kind, by its short name.
func Definition() *mstclient.Definition {
	return &mstclient.Definition{
		Name:        "echo-agent",
		Description: "No model: calls the tool the prompt names with the prompt's quoted text, and answers with the result.",
		Requirements: mstclient.Requirements{
			OS:          []string{"linux", "darwin", "windows"},
			Credentials: []string{"none"},
		},
		Options: mstclient.OptionsSchema(mstclient.SharedOptions{Timeout: "2m"}),
		Timeout: 2 * time.Minute,
		// Variants name the offline model; the client never asks it.
		ModelProviders: []string{"offline"},
		Concurrent:     true,
		ProxiedServers: true,
		Run:            run,
	}
}

// run runs one trial.
func run(ctx context.Context, p mstclient.OpenParams, t mstclient.Trial) (mstclient.Result, error) {
	res := mstclient.Result{
		ClientVersion: Version,
		Messages:      []transcript.Message{{Role: "user", Text: t.Prompt}},
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "acme-echo-agent", Version: Version}, nil)
	var offered []offeredTool
	for _, srv := range p.TrialServers(t) {
		cs, err := connect(ctx, c, srv)
		if err != nil {
			return res, err
		}
		defer cs.Close()
		info := transcript.ServerInfo{Name: srv.Name, Transport: srv.Transport()}
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return res, fmt.Errorf("server %s: %w: listing tools: %v", srv.Name, servers.ErrServer, err)
			}
			info.Tools = append(info.Tools, tool.Name)
			offered = append(offered, offeredTool{server: srv.Name, session: cs, tool: tool})
		}
		res.Servers = append(res.Servers, info)
	}
	if len(offered) == 0 {
		res.Outcome = transcript.Outcome{Status: transcript.NoAnswer, Detail: "no server offers a tool"}
		return res, nil
	}

	pick := choose(offered, t.Prompt)
	args, err := json.Marshal(arguments(pick.tool, t.Prompt))
	if err != nil {
		return res, err
	}
	call := transcript.ToolCall{
		ID: "call-1", Server: pick.server, Tool: pick.tool.Name, Arguments: args,
		Started: time.Now(), Evidence: transcript.EvidenceClient,
	}
	res.Messages = append(res.Messages, transcript.Message{Role: "assistant", ToolCalls: []string{call.ID}})
	out, err := pick.session.CallTool(ctx, &mcp.CallToolParams{Name: pick.tool.Name, Arguments: json.RawMessage(args)})
	call.DurationMs = float64(time.Since(call.Started).Microseconds()) / 1000
	if err != nil {
		// The call failed (or the trial's context ended): the partial
		// transcript, errored; the worker decides what a context that
		// ended means.
		call.Error = err.Error()
		res.ToolCalls = append(res.ToolCalls, call)
		res.Outcome = transcript.Outcome{Status: transcript.Errored, Cause: transcript.CauseServer,
			Detail: fmt.Sprintf("server %s: tool %s: %v", pick.server, pick.tool.Name, err)}
		return res, nil
	}
	call.Result, call.IsError = servers.ResultText(out), out.IsError
	res.ToolCalls = append(res.ToolCalls, call)
	res.Messages = append(res.Messages, transcript.Message{Role: "tool", ToolCall: call.ID, Text: call.Result})
	res.Answer = call.Result
	if call.IsError {
		res.Answer = "The tool failed: " + call.Result
	}
	res.Messages = append(res.Messages, transcript.Message{Role: "assistant", Text: res.Answer})
	res.Outcome = transcript.Outcome{Status: transcript.Answered}
	return res, nil
}

// connect opens an MCP session with one of the trial's servers: MST's
// proxy, over streamable HTTP, with the headers it asks for.
func connect(ctx context.Context, c *mcp.Client, srv servers.Server) (*mcp.ClientSession, error) {
	if srv.URL == "" {
		return nil, fmt.Errorf("server %s: %w: echo-agent reaches servers over streamable HTTP only (through MST's proxy), and %s has no URL", srv.Name, servers.ErrServer, srv.Name)
	}
	tr := &mcp.StreamableClientTransport{
		Endpoint:   srv.URL,
		HTTPClient: &http.Client{Transport: servers.WithHeaders(http.DefaultTransport, srv.Headers)},
		MaxRetries: -1,
	}
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("server %s: %w: connecting to %s: %v", srv.Name, servers.ErrServer, srv.URL, err)
	}
	return cs, nil
}

// offeredTool is one tool of one of the trial's servers.
type offeredTool struct {
	server  string
	session *mcp.ClientSession
	tool    *mcp.Tool
}

// choose picks the tool to call for prompt (see the package doc).
func choose(tools []offeredTool, prompt string) offeredTool {
	for _, w := range words(prompt) {
		if len([]rune(w)) < 4 {
			continue
		}
		for _, t := range tools {
			if strings.Contains(strings.ToLower(t.tool.Name), w) {
				return t
			}
		}
	}
	return tools[0]
}

// words are the prompt's words, lowercased, in order.
func words(prompt string) []string {
	return strings.FieldsFunc(strings.ToLower(prompt), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

var (
	quotedRE = regexp.MustCompile(`'([^']+)'|"([^"]+)"`)
	numberRE = regexp.MustCompile(`-?\d+(\.\d+)?`)
)

// arguments fills the tool's required properties from prompt.
func arguments(tool *mcp.Tool, prompt string) map[string]any {
	var schema struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if data, err := json.Marshal(tool.InputSchema); err == nil {
		json.Unmarshal(data, &schema)
	}
	text := ""
	if m := quotedRE.FindStringSubmatch(prompt); m != nil {
		text = m[1] + m[2]
	} else if ws := strings.Fields(prompt); len(ws) > 0 {
		text = strings.TrimFunc(ws[len(ws)-1], unicode.IsPunct)
	}
	number := 0.0
	if m := numberRE.FindString(prompt); m != "" {
		number, _ = strconv.ParseFloat(m, 64)
	}
	args := map[string]any{}
	for _, name := range schema.Required {
		switch typeOf(schema.Properties[name].Type) {
		case "string":
			args[name] = text
		case "number":
			args[name] = number
		case "integer":
			args[name] = int64(number)
		}
	}
	return args
}

// typeOf is a property's JSON Schema type, the first non-null one of a
// list.
func typeOf(t any) string {
	switch t := t.(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}
