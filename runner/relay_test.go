package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// throughRelay runs argv under the relay over an in-process channel that
// loses nothing, as RunRelayed's caller would over kubectl exec.
func throughRelay(t *testing.T, argv []string, stdin io.Reader) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = RunRelayed(func(in io.Reader, w io.Writer) error {
		return relay(argv, in, w)
	}, stdin, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestRelayCarriesStreamsAndCode(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 300<<10/16) // several frames
	cases := []struct {
		name           string
		argv           []string
		stdin          io.Reader
		stdout, stderr string
		code           int
	}{
		{name: "stdin to stdout", argv: []string{"cat"}, stdin: strings.NewReader(big), stdout: big},
		{name: "no stdin", argv: []string{"sh", "-c", "echo out; echo err >&2"}, stdout: "out\n", stderr: "err\n"},
		{name: "empty output", argv: []string{"true"}, stdin: strings.NewReader("")},
		{name: "exit code", argv: []string{"sh", "-c", "printf partial; exit 3"}, stdin: strings.NewReader(""), stdout: "partial", code: 3},
		{name: "killed by a signal", argv: []string{"sh", "-c", "kill -TERM $$"}, code: 128 + 15},
		{name: "unread stdin", argv: []string{"sh", "-c", "echo done"}, stdin: strings.NewReader(big), stdout: "done\n"},
		{name: "Unicode", argv: []string{"printf", "héllo 世界 🚀"}, stdout: "héllo 世界 🚀"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, err := throughRelay(t, c.argv, c.stdin)
			if stdout != c.stdout {
				t.Errorf("stdout: %d bytes, want %d (%.40q…)", len(stdout), len(c.stdout), stdout)
			}
			if stderr != c.stderr {
				t.Errorf("stderr = %q, want %q", stderr, c.stderr)
			}
			var coded interface{ ExitCode() int }
			switch {
			case c.code == 0 && err != nil:
				t.Errorf("err = %v, want nil", err)
			case c.code != 0 && !errors.As(err, &coded):
				t.Errorf("err = %v, want one with the exit code %d", err, c.code)
			case c.code != 0 && coded.ExitCode() != c.code:
				t.Errorf("ExitCode() = %d, want %d", coded.ExitCode(), c.code)
			}
		})
	}
}

func TestRelayMissingCommand(t *testing.T) {
	_, stderr, err := throughRelay(t, []string{"/no/such/program"}, nil)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 127 {
		t.Errorf("err = %v, want exit status 127", err)
	}
	if !strings.Contains(stderr, "/no/such/program") {
		t.Errorf("stderr = %q, want it to name the program", stderr)
	}
}

// frame is one frame as the relay writes it.
func frame(kind byte, p []byte) []byte {
	b := []byte{kind, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(p)))
	return append(b, p...)
}

func TestRelayCutShort(t *testing.T) {
	// The channel delivers some output and ends, with no error and no
	// exit code: kubectl exec after a connection closed too soon.
	var out bytes.Buffer
	err := RunRelayed(func(in io.Reader, w io.Writer) error {
		w.Write(frame(frameStdout, []byte("the first half")))
		return nil
	}, strings.NewReader("x"), &out, io.Discard)
	if !errors.Is(err, ErrRelayCut) {
		t.Errorf("err = %v, want ErrRelayCut", err)
	}
	if out.String() != "the first half" {
		t.Errorf("stdout = %q", out.String())
	}

	// A frame split across writes, cut in its middle.
	err = RunRelayed(func(in io.Reader, w io.Writer) error {
		f := frame(frameStdout, []byte("abcdef"))
		w.Write(f[:3])
		w.Write(f[3:8])
		return nil
	}, nil, io.Discard, io.Discard)
	if !errors.Is(err, ErrRelayCut) {
		t.Errorf("cut mid-frame: err = %v, want ErrRelayCut", err)
	}

	// The channel's own error comes back when it failed.
	failed := errors.New("kubectl: connection refused")
	err = RunRelayed(func(in io.Reader, w io.Writer) error { return failed }, nil, io.Discard, io.Discard)
	if !errors.Is(err, failed) {
		t.Errorf("err = %v, want the channel's", err)
	}
}

func TestRelayRefusesAForeignStream(t *testing.T) {
	// An mst without the relay prints its help instead of frames.
	err := RunRelayed(func(in io.Reader, w io.Writer) error {
		w.Write([]byte("Usage:\n  mst runner [command]\n"))
		return nil
	}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not the relay's") {
		t.Errorf("err = %v, want one saying the stream is not the relay's", err)
	}
}

func TestRelayOneByteWrites(t *testing.T) {
	// The channel may hand the frames over in any pieces.
	stream := append(frame(frameStdout, []byte("out")), frame(frameStderr, []byte("err"))...)
	stream = append(stream, frame(frameExit, []byte{0, 0, 0, 2})...)
	var out, errOut bytes.Buffer
	err := RunRelayed(func(in io.Reader, w io.Writer) error {
		for i := range stream {
			w.Write(stream[i : i+1])
		}
		// The caller answers the exit code and ends stdin.
		rest, _ := io.ReadAll(in)
		if !bytes.HasSuffix(rest, frame(frameAck, nil)) {
			t.Errorf("stdin ended with %q, want the answer", rest)
		}
		return nil
	}, nil, &out, &errOut)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Errorf("err = %v, want exit status 2", err)
	}
	if out.String() != "out" || errOut.String() != "err" {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}
