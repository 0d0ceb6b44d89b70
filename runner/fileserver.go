package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"
)

// Bringing a transcript back with the channel's CopyFrom costs a process
// and a round trip or more per file: a `docker cp`, a `kubectl cp` under
// the relay. A shard copies one file per trial, so MachineRunner instead
// starts one `mst runner serve-files RESULTS` on the machine per shard and
// asks it for each file over its stdin and stdout: a request is a JSON
// line {"path": P}; the answer is a JSON line {"size": N} followed by N
// bytes, or {"error": MSG, "notFound": BOOL}. Requests go one at a time.
// The coordinator trusts the server no more than the worker: it checks
// the path before asking, and bounds the size it reads.

// ServeFilesCommand is `mst runner serve-files ROOT`: it serves the
// regular files under ROOT, read through an os.Root so nothing outside it
// is reachable, until its stdin ends.
func ServeFilesCommand() MachineCommand {
	return MachineCommand{
		Name:  "serve-files",
		Usage: "ROOT",
		Short: "Serve the files under ROOT on stdin and stdout (the coordinator's copies of a shard's transcripts)",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			if len(args) != 1 {
				return fmt.Errorf("serve-files takes the folder to serve, got %q", args)
			}
			return serveFiles(args[0], os.Stdin, stdout)
		},
	}
}

// MachineRunnerCommands are the machine commands MachineRunner itself
// runs on every machine; mst offers them beside each runner's own.
func MachineRunnerCommands() []MachineCommand {
	return []MachineCommand{ServeFilesCommand()}
}

type fileRequest struct {
	Path string `json:"path"`
}

type fileAnswer struct {
	Size     int64  `json:"size"`
	Error    string `json:"error,omitempty"`
	NotFound bool   `json:"notFound,omitempty"`
}

func serveFiles(dir string, in io.Reader, out io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	w := bufio.NewWriter(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		var req fileRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("serve-files: a request is not JSON: %v", err)
		}
		if err := serveOne(root, req.Path, w); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// serveOne answers one request; only a failed write is an error.
func serveOne(root *os.Root, p string, w *bufio.Writer) error {
	answer := func(a fileAnswer) error {
		b, _ := json.Marshal(a)
		_, err := w.Write(append(b, '\n'))
		return err
	}
	if err := checkFetchPath(p); err != nil {
		return answer(fileAnswer{Error: err.Error()})
	}
	f, err := root.Open(filepath.FromSlash(p))
	if err != nil {
		return answer(fileAnswer{Error: err.Error(), NotFound: errors.Is(err, os.ErrNotExist)})
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return answer(fileAnswer{Error: err.Error()})
	}
	if !st.Mode().IsRegular() {
		return answer(fileAnswer{Error: fmt.Sprintf("%s is %s, not a regular file", p, kind(st.Mode()))})
	}
	if st.Size() > maxFetchBytes {
		return answer(fileAnswer{Error: fmt.Sprintf("%s is larger than %d MiB, the most MST fetches", p, maxFetchBytes>>20)})
	}
	// The size is fixed before the bytes go: a file that grows is cut to
	// it, one that shrinks is padded with zeros and so fails to decode.
	if err := answer(fileAnswer{Size: st.Size()}); err != nil {
		return err
	}
	n, err := io.Copy(w, io.LimitReader(f, st.Size()))
	if err == nil && n < st.Size() {
		_, err = w.Write(make([]byte, st.Size()-n))
	}
	return err
}

// fileClient asks one machine's serve-files for files. It starts the
// server on first use; once the stream fails, every later fetch goes
// through the channel's CopyFrom instead.
type fileClient struct {
	m       Machine
	root    string
	execCtx context.Context
	stderr  io.Writer

	mu     sync.Mutex
	w      io.WriteCloser
	r      *bufio.Reader
	broken error
	stop   context.CancelFunc
	done   chan struct{}
}

// errServerGone marks a file server that could not answer.
var errServerGone = errors.New("the machine's file server is gone")

func (c *fileClient) start() error {
	ctx, cancel := context.WithCancel(c.execCtx)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	argv := append(append([]string(nil), c.m.MST()...), "runner", "serve-files", c.root)
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		err := c.m.Exec(ctx, argv, inR, outW, c.stderr)
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(fmt.Errorf("%w: %v", errServerGone, err))
		inR.CloseWithError(errServerGone)
	}()
	c.w, c.r, c.stop = inW, bufio.NewReaderSize(outR, 64<<10), cancel
	return nil
}

// fetch asks for p (checked by the caller). ok is false when the server
// cannot serve, and the caller should copy the file another way.
func (c *fileClient) fetch(ctx context.Context, p string) (data []byte, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, false, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	if c.w == nil {
		c.start()
	}
	type result struct {
		data []byte
		err  error
		gone bool
	}
	res := make(chan result, 1)
	go func() {
		b, gone, err := c.ask(p)
		res <- result{b, err, gone}
	}()
	select {
	case r := <-res:
		if r.gone {
			c.breakLocked(r.err)
			return nil, false, nil
		}
		return r.data, true, r.err
	case <-ctx.Done():
		// The stream is mid-answer: no later request could trust it.
		c.breakLocked(ctx.Err())
		<-res
		return nil, true, ctx.Err()
	}
}

// ask sends one request and reads its answer; gone says the stream failed.
func (c *fileClient) ask(p string) (data []byte, gone bool, err error) {
	b, _ := json.Marshal(fileRequest{Path: p})
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return nil, true, err
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, true, err
	}
	var a fileAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		return nil, true, fmt.Errorf("the machine's file server answered %q: %v", line, err)
	}
	if a.Error != "" {
		if a.NotFound {
			return nil, false, fmt.Errorf("%s: %w", path.Join(c.root, p), os.ErrNotExist)
		}
		return nil, false, errors.New(a.Error)
	}
	if a.Size < 0 || a.Size > maxFetchBytes {
		return nil, true, fmt.Errorf("the machine's file server announced %d bytes for %s", a.Size, p)
	}
	data = make([]byte, a.Size)
	if _, err := io.ReadFull(c.r, data); err != nil {
		return nil, true, err
	}
	return data, false, nil
}

func (c *fileClient) breakLocked(err error) {
	if c.broken == nil {
		c.broken = fmt.Errorf("%w: %v", errServerGone, err)
	}
	if c.stop != nil {
		c.w.Close()
		c.stop()
	}
}

// close ends the server, and waits for it.
func (c *fileClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return
	}
	c.w.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		// A server that does not end with its stdin is stopped.
		c.stop()
		<-c.done
	}
	c.stop()
}

// CheapCopies is implemented by machines whose CopyFrom costs no process
// or round trip (a folder of this machine): MachineRunner then copies with
// it and starts no file server.
type CheapCopies interface {
	CopiesCheaply() bool
}
