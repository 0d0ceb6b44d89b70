// Package testserver is a small MCP server for MST's own tests, with tools
// that misbehave on purpose: one that makes the server exit, one that
// sleeps. It runs over stdio inside the test binary (testscript registers
// Main as a command) so tests need no separate build.
//
// Flags (as arguments): --hang makes the server read stdin and never answer,
// for readiness timeouts; --fail-start makes it print a message on stderr
// and exit 3 before speaking MCP; --no-tools makes it list no tools;
// --many adds ManyTools tools, some with Unicode or long names;
// --mark DIR makes the sleep tool create a file in DIR when a call starts,
// one per call (so a test learns, as an event, that a call is in flight),
// and end a call at once, as if its time had passed, when DIR holds a file
// named wake (so a test whose calls must outlast an event can make them
// long, and still let the calls of a later run through by creating it);
// --stubborn makes it ignore SIGTERM, SIGHUP, SIGINT and SIGPIPE and
// outlive its stdin, so only SIGKILL ends it; --notes DIR adds the note
// tools (AddNotes), with annotations of every kind, whose writes create
// files in DIR; --protocol VERSION makes it speak only that MCP protocol
// version (an older one, such as 2024-11-05). Other arguments are ignored,
// so a test may tag its server's command line.
package testserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Main runs the server on the process's stdio and returns the exit code.
func Main() int {
	args := os.Args[1:]
	switch {
	case slices.Contains(args, "--fail-start"):
		fmt.Fprintln(os.Stderr, "testserver: cannot open the database at /nonexistent/db.sqlite")
		return 3
	case slices.Contains(args, "--hang"):
		fmt.Fprintln(os.Stderr, "testserver: warming up a very slow cache")
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	var opts *mcp.ServerOptions
	if i := slices.Index(args, "--protocol"); i >= 0 && i+1 < len(args) {
		opts = &mcp.ServerOptions{SupportedProtocolVersions: []string{args[i+1]}}
	}
	s := NewWith(!slices.Contains(args, "--no-tools"), opts)
	if i := slices.Index(args, "--notes"); i >= 0 && i+1 < len(args) {
		AddNotes(s, args[i+1])
	}
	if slices.Contains(args, "--many") {
		AddMany(s)
	}
	if i := slices.Index(args, "--mark"); i >= 0 && i+1 < len(args) {
		markDir = args[i+1]
	}
	// --stubborn: a server that will not go when asked: it ignores
	// SIGTERM, SIGHUP, SIGINT and SIGPIPE, and lives on after its stdin
	// ends. Only SIGKILL (or its process group's) ends it.
	stubborn := slices.Contains(args, "--stubborn")
	if stubborn {
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	}
	err := s.Run(context.Background(), &mcp.StdioTransport{})
	if stubborn {
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		return 1
	}
	return 0
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

type sleepIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to sleep"`
}

type failIn struct {
	Reason string `json:"reason" jsonschema:"why the call fails"`
}

// markDir, when set (--mark), is where the sleep tool leaves a file as a
// call starts, and where a file named wake ends its calls.
var markDir string

// calls numbers the sleep calls, for their mark files.
var calls atomic.Int64

// WakeFile is the name of the file in the --mark folder that ends every
// sleep call at once.
const WakeFile = "wake"

// awake reports whether the --mark folder holds the wake file.
func awake() bool {
	if markDir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(markDir, WakeFile))
	return err == nil
}

type crashIn struct {
	Code int `json:"code,omitempty" jsonschema:"the exit code"`
}

// New returns the server; with tools false it lists none.
func New(tools bool) *mcp.Server { return NewWith(tools, nil) }

// NewWith is New with the SDK's server options.
func NewWith(tools bool, opts *mcp.ServerOptions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mst-testserver", Version: "1.0.0"}, opts)
	if !tools {
		return s
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the given text back unchanged."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep (wait, pause) for a number of seconds, then say so."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			if markDir != "" {
				os.WriteFile(filepath.Join(markDir, fmt.Sprintf("sleep-%d-%d", os.Getpid(), calls.Add(1))), nil, 0o600)
			}
			timer := time.NewTimer(time.Duration(in.Seconds * float64(time.Second)))
			defer timer.Stop()
			// The wake file is looked for now and then: it is made by a
			// test, on a machine that may not offer file events.
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
		sleep:
			for !awake() {
				select {
				case <-timer.C:
					break sleep
				case <-tick.C:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("slept %gs", in.Seconds)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail on purpose: answer with an error result that gives the reason."},
		func(ctx context.Context, req *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "fail: " + in.Reason}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Crash the server process (exit) immediately."},
		func(ctx context.Context, req *mcp.CallToolRequest, in crashIn) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "testserver: crashing as asked")
			os.Exit(max(in.Code, 1))
			return nil, nil, nil
		})
	return s
}

// ManyTools is how many tools AddMany adds.
const ManyTools = 42

// Tools AddMany adds besides the numbered fillers: one whose name is not
// ASCII and one with a long name. Each answers "NAME: TEXT".
const (
	UnicodeTool = "météo_prévision"
	LongTool    = "summarise_the_quarterly_inventory_of_a_warehouse_region"
)

// AddMany adds ManyTools tools to s: UnicodeTool, LongTool and numbered
// fillers (filler_03, …), each taking a text and echoing it after its name.
func AddMany(s *mcp.Server) {
	add := func(name, desc string) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc},
			func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ": " + in.Text}}}, nil, nil
			})
	}
	add(UnicodeTool, "Météo: the weather forecast (prévision) for a city.")
	add(LongTool, "Summarise the quarterly inventory of a warehouse region.")
	for i := 3; i <= ManyTools; i++ {
		add(fmt.Sprintf("filler_%02d", i), fmt.Sprintf("Filler number %d; it does nothing useful.", i))
	}
}

type noteIn struct {
	Name string `json:"name" jsonschema:"the note's name: letters, digits, - and _"`
	Text string `json:"text,omitempty" jsonschema:"the note's text"`
}

type noteOut struct {
	Name  string `json:"name"`
	Bytes int    `json:"bytes"`
}

// The note tools AddNotes adds, one of each kind of annotation.
const (
	ReadNote   = "read_note"   // readOnlyHint true
	WriteNote  = "write_note"  // a write, destructiveHint false, with an output schema
	DeleteNote = "delete_note" // destructiveHint true
	TouchNote  = "touch_note"  // no annotations at all (by the MCP defaults, a write)
)

// AddNotes adds the note tools, which keep notes as files in dir: a test
// sees that a write reached the server when its file is there.
func AddNotes(s *mcp.Server, dir string) {
	file := func(name string) (string, error) {
		for _, r := range name {
			if !(r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
				return "", fmt.Errorf("a note's name is letters, digits, - and _, not %q", name)
			}
		}
		if name == "" {
			return "", fmt.Errorf("a note needs a name")
		}
		return filepath.Join(dir, name), nil
	}
	errResult := func(err error) *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
	}
	no := false
	mcp.AddTool(s, &mcp.Tool{Name: ReadNote, Description: "Read a note by its name.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Read a note"}},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			f, err := file(in.Name)
			if err != nil {
				return errResult(err), nil, nil
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return errResult(fmt.Errorf("no note named %s", in.Name)), nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: WriteNote, Description: "Write a note: create it or replace its text.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, noteOut, error) {
			f, err := file(in.Name)
			if err != nil {
				return errResult(err), noteOut{}, nil
			}
			if err := os.WriteFile(f, []byte(in.Text), 0o600); err != nil {
				return errResult(err), noteOut{}, nil
			}
			return nil, noteOut{Name: in.Name, Bytes: len(in.Text)}, nil
		})
	yes := true
	mcp.AddTool(s, &mcp.Tool{Name: DeleteNote, Description: "Delete a note for good.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			f, err := file(in.Name)
			if err != nil {
				return errResult(err), nil, nil
			}
			if err := os.Remove(f); err != nil {
				return errResult(fmt.Errorf("no note named %s", in.Name)), nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Name}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: TouchNote, Description: "Create an empty note if there is none."},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			f, err := file(in.Name)
			if err != nil {
				return errResult(err), nil, nil
			}
			fh, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return errResult(err), nil, nil
			}
			fh.Close()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched " + in.Name}}}, nil, nil
		})
}
