package cliproc

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/proctree"
	"github.com/mst-eval/mst/internal/ground/tailbuf"
)

// Grace is how long a CLI's process tree has between SIGTERM and SIGKILL
// when a Process is stopped.
const Grace = 3 * time.Second

// scanEvery is how often a running Process looks for the processes its
// program started.
const scanEvery = 250 * time.Millisecond

// goneWithin bounds how long Wait waits, after the last SIGKILL, for the
// processes of the tree to be gone.
const goneWithin = 2 * time.Second

// Command is one run of a CLI client's program.
type Command struct {
	Path string
	Args []string
	// Env is the whole environment; Dir the folder it runs in.
	Env []string
	Dir string
	// Stdin is what the program reads on its standard input, then end of
	// file; "" gives it /dev/null. The prompt goes here rather than in Args
	// where the program can read it from there: argv is visible to every
	// user of the machine.
	Stdin string
	// StdinFile, when set, is the path of a regular file the program reads
	// as its standard input instead of Stdin. Stdin reaches the program
	// through a pipe that Go fills while the program runs; a file is whole
	// from the moment the program starts, for programs that give up on
	// standard input when nothing has come soon enough.
	StdinFile string
	// Line is called with each non-empty line the program writes to
	// stdout, trimmed, with its arrival time, one at a time and in order,
	// from a goroutine of the Process. It may call Stop. Everything it did
	// happens before Wait returns.
	Line func(at time.Time, text []byte)
	// StopWhen, when set, is called after each Line, from the same
	// goroutine; the first time it reports true (the client's maxActions
	// reached) the Process is stopped, as by Stop.
	StopWhen func() bool
	// StderrTail is how many bytes of the end of stderr the Process keeps
	// (4096 when zero); Stderr, when set, also gets everything written.
	StderrTail int
	Stderr     io.Writer
	// Started, when set, is told the program's pid (also its process
	// group's id); tests use it.
	Started func(pid int)
}

// Process is a running CLI program in a process group of its own, with
// the processes it starts (MCP servers) found as they appear. When ctx
// (given to Start) ends, or Stop is called, the whole tree gets SIGTERM,
// then SIGKILL after Grace. Wait returns once the program has exited and
// nothing of its tree is left.
type Process struct {
	cmd    *exec.Cmd
	tree   *proctree.Tree
	stderr *tailbuf.Buffer
	stdout *lineWriter

	ready    chan struct{} // closed once cmd and tree are set
	stopOnce sync.Once
	stopping chan struct{}
	done     chan struct{}
	watched  chan struct{}

	mu   sync.Mutex
	seen map[int]bool
}

// Start starts c. The error says the program could not be started at all.
func Start(ctx context.Context, c Command) (*Process, error) {
	n := c.StderrTail
	if n == 0 {
		n = 4096
	}
	p := &Process{stderr: tailbuf.New(n), ready: make(chan struct{}), stopping: make(chan struct{}), done: make(chan struct{}), watched: make(chan struct{}), seen: map[int]bool{}}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.Stdin = nil // /dev/null
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	if c.StdinFile != "" {
		f, err := os.Open(c.StdinFile)
		if err != nil {
			return nil, err
		}
		// The program gets its own copy of the descriptor at Start.
		defer f.Close()
		cmd.Stdin = f
	}
	line := c.Line
	if c.StopWhen != nil {
		line = func(at time.Time, text []byte) {
			if c.Line != nil {
				c.Line(at, text)
			}
			if c.StopWhen() {
				<-p.ready // a line may come before Start has returned
				p.Stop()
			}
		}
	}
	p.stdout = &lineWriter{line: line}
	cmd.Stdout = p.stdout
	cmd.Stderr = p.stderr
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, c.Stderr)
	}
	// A straggler that escaped the tree and holds the pipes open cannot
	// keep Wait waiting.
	cmd.WaitDelay = 2 * Grace
	proctree.Group(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.cmd, p.tree = cmd, proctree.Of(cmd)
	close(p.ready)
	if c.Started != nil {
		c.Started(cmd.Process.Pid)
	}
	go p.watch(ctx)
	return p, nil
}

// watch remembers the tree as it grows, and stops it when ctx ends.
func (p *Process) watch(ctx context.Context) {
	defer close(p.watched)
	tick := time.NewTicker(scanEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-ctx.Done():
			p.Stop()
			return
		case <-tick.C:
			p.scan()
		}
	}
}

// scan remembers the descendants found now.
func (p *Process) scan() {
	p.tree.Scan()
	d := proctree.Descendants(p.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pid := range d {
		p.seen[pid] = true
	}
}

// Stop ends the whole tree: SIGTERM now, SIGKILL after Grace unless the
// program has exited by then. It returns at once and may be called more
// than once, from any goroutine.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		close(p.stopping)
		p.scan()
		p.tree.Signal(syscall.SIGTERM)
		go func() {
			t := time.NewTimer(Grace)
			defer t.Stop()
			select {
			case <-t.C:
				p.tree.Signal(syscall.SIGKILL)
			case <-p.done:
			}
		}()
	})
}

// Stopped reports whether Stop was called (or ctx ended).
func (p *Process) Stopped() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

// Wait waits for the program to exit and its stdout to be read, then
// kills whatever of its tree is left (a server it did not stop) and waits,
// briefly, for it to be gone. It returns the program's exit error.
func (p *Process) Wait() error {
	err := p.cmd.Wait()
	p.stdout.Close()
	close(p.done)
	<-p.watched
	p.tree.Signal(syscall.SIGKILL)
	p.mu.Lock()
	pids := make([]int, 0, len(p.seen))
	for pid := range p.seen {
		pids = append(pids, pid)
	}
	p.mu.Unlock()
	deadline := time.Now().Add(goneWithin)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return err
}

// Stderr returns the end of what the program wrote to stderr.
func (p *Process) Stderr() string { return p.stderr.String() }

// alive reports whether pid is a process that has not exited, as /proc
// says; false where there is no /proc.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// lineWriter splits what the program writes into lines for line.
type lineWriter struct {
	line    func(time.Time, []byte)
	partial []byte
}

// Write is called by one goroutine of exec.Cmd at a time.
func (w *lineWriter) Write(b []byte) (int, error) {
	now := time.Now()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.emit(now, w.partial[:i])
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) == 0 {
		w.partial = nil
	}
	return len(b), nil
}

// Close hands on an unterminated last line.
func (w *lineWriter) Close() error {
	w.emit(time.Now(), w.partial)
	w.partial = nil
	return nil
}

func (w *lineWriter) emit(at time.Time, l []byte) {
	if l = bytes.TrimSpace(l); len(l) > 0 && w.line != nil {
		w.line(at, append([]byte(nil), l...))
	}
}
