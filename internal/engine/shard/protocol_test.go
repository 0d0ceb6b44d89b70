package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
)

var updateGolden = flag.Bool("update", false, "rewrite the exchange and result sections of testdata/protocol/*.txtar")

// protocolMST is the coordinator's MST version in the transcript tests. A
// worker's hello must carry it to be accepted.
const protocolMST = "2.0.0-test"

// TestProtocol replays the worker side of each archive in
// testdata/protocol against Coordinator.Serve and compares the recorded
// conversation with the archive's golden sections.
//
// An archive holds a comment saying what the scenario shows, and:
//
//   - worker: the script the fake worker follows, one step a line. A line
//     starting with "{" is sent as it is, with a newline. "send TEXT" sends
//     TEXT and a newline, for lines that are not JSON; "sendq QUOTED" does
//     the same with a Go-quoted string (for spaces and control characters);
//     "write TEXT" sends TEXT with no newline. "close" closes the worker's stdout. "interrupt"
//     ends Serve's context, as Ctrl-C does. "sleep DURATION" lets that much
//     (fake) time pass. Lines starting with "#" are comments.
//   - exchange (golden): the conversation, "> " for a line the worker sent
//     and "< " for one the coordinator sent, with "# " notes.
//   - result (golden): what Serve returned, and what the coordinator did on
//     its side, in order: fetch calls, trials reported to Events, and its
//     log.
//
// Everything runs in a synctest bubble and the fake worker waits for the
// coordinator to settle after each step, so the recording is the same on
// every run. Regenerate the golden sections with
//
//	go test ./shard -run TestProtocol -update
func TestProtocol(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "protocol", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no archives in testdata/protocol")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			script, ok := section(a, "worker")
			if !ok {
				t.Fatalf("%s has no worker section", file)
			}
			var exchange, result string
			synctest.Test(t, func(t *testing.T) {
				exchange, result = replay(t, script)
			})
			if *updateGolden {
				setSection(a, "exchange", exchange)
				setSection(a, "result", result)
				if err := os.WriteFile(file, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, s := range []struct{ name, got string }{{"exchange", exchange}, {"result", result}} {
				want, ok := section(a, s.name)
				if !ok {
					t.Errorf("%s has no %s section; regenerate it with go test ./shard -run TestProtocol -update", file, s.name)
					continue
				}
				if diff := cmp.Diff(want, s.got); diff != "" {
					t.Errorf("Serve(%s) %s differs from the archive (-want +got):\n%s", filepath.Base(file), s.name, diff)
				}
			}
		})
	}
}

// replay runs one worker script against a Coordinator with fixed settings
// and returns the exchange and result sections. It must run in a synctest
// bubble.
func replay(t *testing.T, script string) (exchange, result string) {
	side := &sideLog{}
	keys := secrets.New()
	if err := keys.Add("ANTHROPIC_API_KEY", "test-key-not-secret"); err != nil {
		t.Fatal(err)
	}
	c := &shard.Coordinator{
		MSTVersion: protocolMST,
		Limits:     shard.NewLimiter(map[string]int{"anthropic": 2}, map[string]int{"weather": 1}),
		Events:     side,
		Logger: slog.New(slog.NewTextHandler(side, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})),
		Secrets: keys,
	}
	// A transcript whose path names "unreachable" cannot be copied back;
	// every other copy works and returns fetchedBytes(path). Like the
	// processes runner's copy, it does not look at ctx.
	fetch := func(ctx context.Context, path string) ([]byte, error) {
		if strings.Contains(path, "unreachable") {
			side.add("fetch " + path + ": no such file on the worker machine")
			return nil, errors.New("no such file on the worker machine")
		}
		side.add("fetch " + path)
		return fetchedBytes(path), nil
	}
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	w := startServe(t, ctx, c, 0, fetch)
	start := time.Now()
	for n, line := range strings.Split(strings.TrimSuffix(script, "\n"), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		synctest.Wait()
		if w.returned() {
			w.note("# Serve has returned; the rest of the script is not sent")
			break
		}
		verb, arg, _ := strings.Cut(line, " ")
		var err error
		switch {
		case strings.HasPrefix(line, "{"):
			err = w.send(line)
		case verb == "send":
			err = w.write(arg+"\n", sentEntry(arg))
		case verb == "sendq":
			text, qerr := strconv.Unquote(arg)
			if qerr != nil {
				t.Fatalf("worker line %d: %v", n+1, qerr)
			}
			err = w.write(text+"\n", sentEntry(text))
		case verb == "write":
			err = w.write(arg, sentEntry(arg)+" [no newline]")
		case line == "close":
			w.note("# the worker's stdout closes")
			w.closeStdout()
		case line == "interrupt":
			w.note("# the run is interrupted: Serve's context ends")
			interrupt()
		case verb == "sleep":
			d, err := time.ParseDuration(arg)
			if err != nil {
				t.Fatalf("worker line %d: %v", n+1, err)
			}
			w.note("# " + d.String() + " pass")
			time.Sleep(d)
		default:
			t.Fatalf("worker line %d: unknown step %q", n+1, line)
		}
		if err != nil {
			w.note("# the worker's write failed: " + err.Error())
		}
	}
	res, err := w.wait()
	elapsed := w.returnedAt.Sub(start)

	var r strings.Builder
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			msg = strconv.Quote(msg)
		}
		fmt.Fprintf(&r, "Serve returned after %s: %s\n", elapsed, msg)
	} else {
		fmt.Fprintf(&r, "Serve returned after %s with no error\n", elapsed)
	}
	fmt.Fprintf(&r, "lost: %t\n", errors.Is(err, shard.ErrWorkerLost))
	fmt.Fprintf(&r, "hello: %s\n", jsonOrNone(t, res.Hello))
	fmt.Fprintf(&r, "done: %s\n", jsonOrNone(t, res.Done))
	for _, l := range side.lines() {
		r.WriteString(l + "\n")
	}
	return strings.Join(w.log(), "\n") + "\n", r.String()
}

// sentEntry is how the exchange shows a line the worker sent: as it is,
// or Go-quoted after "(quoted)" when it is empty or has spaces at either
// end or characters that do not print.
func sentEntry(text string) string {
	if text != "" && text == strings.TrimSpace(text) && strconv.CanBackquote(text) {
		return "> " + text
	}
	return "> (quoted) " + strconv.Quote(text)
}

func jsonOrNone[T any](t *testing.T, v *T) string {
	if v == nil {
		return "none"
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sideLog keeps, in order, what the coordinator does besides writing
// lines: fetch calls, trials it reports (it is the Events) and its log (it
// is the log handler's writer).
type sideLog struct {
	mu  sync.Mutex
	all []string
}

func (s *sideLog) add(line string) {
	s.mu.Lock()
	s.all = append(s.all, line)
	s.mu.Unlock()
}

func (s *sideLog) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.all...)
}

// Trial records a reported trial. The bytes reported with it must be the
// ones replay's fetch returned for its path; other bytes are recorded, so
// the result section differs from the archive.
func (s *sideLog) Trial(index int, m *protocol.Trial, data []byte) {
	s.add(fmt.Sprintf("reported shard=%d trial=%s status=%s path=%s", index, m.Key, m.Status, m.Path))
	if want := fetchedBytes(m.Path); string(data) != string(want) {
		s.add(fmt.Sprintf("reported with bytes %q, want %q", data, want))
	}
}

// fetchedBytes is what replay's fetch returns for path.
func fetchedBytes(path string) []byte {
	return []byte(`{"kind":"mst.transcript","path":"` + path + `"}`)
}

// Write records log records, one line each.
func (s *sideLog) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimSuffix(string(p), "\n"), "\n") {
		s.add("log " + l)
	}
	return len(p), nil
}

// section returns the data of the archive's file named name.
func section(a *txtar.Archive, name string) (string, bool) {
	for _, f := range a.Files {
		if f.Name == name {
			return string(f.Data), true
		}
	}
	return "", false
}

// setSection replaces the data of the archive's file named name, or adds
// the file.
func setSection(a *txtar.Archive, name, data string) {
	for i := range a.Files {
		if a.Files[i].Name == name {
			a.Files[i].Data = []byte(data)
			return
		}
	}
	a.Files = append(a.Files, txtar.File{Name: name, Data: []byte(data)})
}
