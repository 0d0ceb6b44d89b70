package runner

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// A relay carries one command's stdin, stdout, stderr and exit code over a
// channel that may drop the end of a stream without saying so. kubectl
// exec is such a channel: when the command in the pod exits, the
// connection can close while the last of its stdout is still on the way,
// and kubectl still exits 0 (kubernetes/kubernetes#124571; both its
// WebSocket and its SPDY paths do it). The relay puts `mst runner relay`
// in front of the command on the machine. It sends everything as frames on
// stdout, the exit code last, and it does not exit, so the connection stays
// open, until the caller's side has read that last frame and answered.
// Nothing can then be in flight when the connection closes, and a channel
// that still ends early is an error rather than a short output.
//
// A frame is one byte of kind, four bytes of length (big-endian), and the
// payload. On the machine's stdout: stdout data, stderr data, and the exit
// code (four bytes, signed). On its stdin: stdin data, the end of stdin,
// and the caller's answer to the exit code.
const (
	frameStdout byte = 'o'
	frameStderr byte = 'r'
	frameExit   byte = 'x'
	frameStdin  byte = 'i'
	frameEOF    byte = 'e'
	frameAck    byte = 'a'
)

// relayChunk is the most a data frame carries.
const relayChunk = 32 << 10

// maxRelayFrame bounds a frame's length, so that a garbled stream is an
// error and not a huge allocation.
const maxRelayFrame = 1 << 20

// RelayCommand is `mst runner relay -- ARGV…`: run inside a machine, it
// runs ARGV and relays it as the relay's frames on its own stdin and
// stdout. SIGTERM and SIGINT do not end it: they reach the command's
// processes (which `mst runner stop-exec` finds by their marker), and the
// relay ends after the command, once the caller has answered its exit code
// or its stdin has ended.
func RelayCommand() MachineCommand {
	return MachineCommand{
		Name:  "relay",
		Usage: "-- ARGV...",
		Short: "Run a command and relay its streams and exit code in frames (run inside a worker machine)",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return errors.New("relay: want a command after --")
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			defer signal.Stop(sig)
			return relay(args, os.Stdin, os.Stdout)
		},
	}
}

// RelayArgv is the command line that runs argv under RelayCommand with mst
// at mst on a machine.
func RelayArgv(mst string, argv []string) []string {
	return append([]string{mst, "runner", "relay", "--"}, argv...)
}

// frameWriter writes frames of one kind to the framer it shares with the
// other kinds.
type frameWriter struct {
	f    *framer
	kind byte
}

func (w frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), relayChunk)]
		if err := w.f.write(w.kind, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// framer writes whole frames to w, one at a time, each in one write.
type framer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (f *framer) write(kind byte, payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf[:0], kind, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(f.buf[1:], uint32(len(payload)))
	f.buf = append(f.buf, payload...)
	_, err := f.w.Write(f.buf)
	return err
}

// readFrame reads one frame from r into buf (grown as needed).
func readFrame(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxRelayFrame {
		return 0, nil, fmt.Errorf("relay: a frame of %d bytes (kind %q): the stream is not the relay's", n, head[0])
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, io.ErrUnexpectedEOF
	}
	return head[0], buf, nil
}

// relay is the machine's side: it runs argv with frames from in as its
// stdin, sends its output and exit code to out, and returns once the
// caller has answered the exit code or in has ended.
func relay(argv []string, in io.Reader, out io.Writer) error {
	f := &framer{w: out}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = frameWriter{f: f, kind: frameStdout}
	cmd.Stderr = frameWriter{f: f, kind: frameStderr}
	childIn, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	// The caller's frames are read until its answer or the end of the
	// stream; stdin data after the command has stopped reading is dropped.
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReaderSize(in, relayChunk+5)
		var buf []byte
		open := true
		for {
			kind, p, err := readFrame(r, buf)
			if err != nil {
				// The caller is gone (or stopped the command): its
				// stdin ends.
				childIn.Close()
				return
			}
			buf = p[:0]
			switch kind {
			case frameStdin:
				if open {
					if _, err := childIn.Write(p); err != nil {
						open = false
					}
				}
			case frameEOF:
				open = false
				childIn.Close()
			case frameAck:
				childIn.Close()
				return
			}
		}
	}()
	code := 0
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(cmd.Stderr, "%s: %v\n", argv[0], err)
		code = 127
	} else if err := cmd.Wait(); err != nil {
		code = exitCode(err)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	if err := f.write(frameExit, b[:]); err != nil {
		return err
	}
	<-done
	return nil
}

// exitCode is a command's exit code as a shell reports it: 128+N for a
// command ended by signal N.
func exitCode(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 126
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// ExitError is a relayed command's non-zero exit code.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return "exit status " + strconv.Itoa(e.Code) }

// ExitCode returns the command's exit code.
func (e *ExitError) ExitCode() int { return e.Code }

// ErrRelayCut is what RunRelayed returns when the channel ended before the
// command's exit code came through: some of its output may be missing.
var ErrRelayCut = errors.New("the channel ended before the command's exit code came through, so some of its output may be lost")

// RunRelayed is the caller's side of a relay. start runs RelayArgv's
// command on the machine with the given stdin and stdout (its stderr is
// the channel's own, for the caller to keep), and returns when the channel
// has ended. RunRelayed feeds stdin to the command, writes its stdout and
// stderr to stdout and stderr, and returns nil, an *ExitError with the
// command's code, or, when the channel ended without the code, start's
// error or ErrRelayCut.
//
// As with the channel itself, the goroutine that copies stdin is not
// waited for: it ends at its next read after the command has ended.
func RunRelayed(start func(stdin io.Reader, stdout io.Writer) error, stdin io.Reader, stdout, stderr io.Writer) error {
	pr, pw := io.Pipe()
	var mu sync.Mutex
	var answered bool
	// answer sends the caller's answer and ends the channel's stdin.
	answer := func() {
		mu.Lock()
		defer mu.Unlock()
		if answered {
			return
		}
		answered = true
		var head [5]byte
		head[0] = frameAck
		pw.Write(head[:])
		pw.Close()
	}
	go func() {
		// Under mu, so that no frame follows the answer.
		send := func(kind byte, p []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if answered {
				return io.ErrClosedPipe
			}
			var head [5]byte
			head[0] = kind
			binary.BigEndian.PutUint32(head[1:], uint32(len(p)))
			if _, err := pw.Write(head[:]); err != nil {
				return err
			}
			_, err := pw.Write(p)
			return err
		}
		if stdin != nil {
			buf := make([]byte, relayChunk)
			for {
				n, err := stdin.Read(buf)
				if n > 0 {
					if send(frameStdin, buf[:n]) != nil {
						return
					}
				}
				if err != nil {
					break
				}
			}
		}
		send(frameEOF, nil)
	}()
	// The answer goes from a goroutine of its own: the channel's stdout
	// must not wait on its stdin.
	d := &demux{stdout: stdout, stderr: stderr, onExit: func() { go answer() }}
	err := start(pr, d)
	// The channel has ended: a write to its stdin must not block.
	pr.CloseWithError(io.ErrClosedPipe)
	switch {
	case d.err != nil:
		return d.err
	case d.exited && d.code == 0:
		return nil
	case d.exited:
		return &ExitError{Code: d.code}
	case err != nil:
		return err
	default:
		return ErrRelayCut
	}
}

// demux parses the relay's frames as they are written to it.
type demux struct {
	stdout, stderr io.Writer
	onExit         func()

	head   [5]byte
	nhead  int
	left   int // payload bytes of the current frame still to come
	kind   byte
	code   int
	exit   []byte
	exited bool
	err    error
}

func (d *demux) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if d.err != nil {
			return 0, d.err
		}
		if d.nhead < 5 {
			c := copy(d.head[d.nhead:], p)
			d.nhead += c
			p = p[c:]
			if d.nhead == 5 {
				d.kind = d.head[0]
				d.left = int(binary.BigEndian.Uint32(d.head[1:]))
				if d.exited || d.left > maxRelayFrame || (d.kind == frameExit && d.left != 4) {
					d.err = fmt.Errorf("relay: a frame of kind %q and %d bytes: the stream is not the relay's", d.kind, d.left)
					return 0, d.err
				}
				d.done()
			}
			continue
		}
		c := min(len(p), d.left)
		chunk := p[:c]
		p = p[c:]
		d.left -= c
		switch d.kind {
		case frameStdout:
			if _, err := d.stdout.Write(chunk); err != nil {
				d.err = err
				return 0, err
			}
		case frameStderr:
			if _, err := d.stderr.Write(chunk); err != nil {
				d.err = err
				return 0, err
			}
		case frameExit:
			d.exit = append(d.exit, chunk...)
		default:
			d.err = fmt.Errorf("relay: a frame of kind %q: the stream is not the relay's", d.kind)
			return 0, d.err
		}
		d.done()
	}
	return n, nil
}

// done ends the current frame once its payload has all come.
func (d *demux) done() {
	if d.left > 0 {
		return
	}
	d.nhead = 0
	if d.kind == frameExit {
		d.code = int(int32(binary.BigEndian.Uint32(d.exit)))
		d.exited = true
		d.onExit()
	}
}
