package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/cli"
	"github.com/mst-eval/mst/internal/engine/report/htmlreport/htmlreporttest"
	"github.com/mst-eval/mst/internal/testkit/chromiumtest"
)

// htmlQuickstartRun runs the quickstart into a temporary results folder and
// returns the run's folder and what mst run wrote on stderr.
func htmlQuickstartRun(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	evalFile := quickstartIn(t, dir)
	var stdout, stderr bytes.Buffer
	results := filepath.Join(dir, "results")
	if code := cli.Main(t.Context(), []string{"run", evalFile, "--results", results}, cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ()}); code != 0 {
		t.Fatalf("mst run exited %d\n%s", code, stderr.String())
	}
	runs, err := filepath.Glob(filepath.Join(results, "*", "runs", "*"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("want one run in %s, have %v (%v)", results, runs, err)
	}
	return runs[0], stderr.String()
}

func mstHTML(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), args, cli.Stdio{Out: &stdout, Err: &stderr, Env: os.Environ()})
	return stdout.String(), stderr.String(), code
}

// TestHTMLReport runs the quickstart: mst run writes report.html into the
// run's folder and says where; mst report --html writes the page to a file
// (and still prints its report); mst view serves it on 127.0.0.1. Each page
// opens in Chromium with nothing on its console, shows the numbers mst
// report --json prints, and opens a transcript from its grid.
func TestHTMLReport(t *testing.T) {
	t.Parallel()
	p := chromiumtest.New(t) // fails under CI, before the run, when Chromium is missing
	runDir, runErr := htmlQuickstartRun(t)
	inRun := filepath.Join(runDir, "report.html")
	if !strings.Contains(runErr, "html report: "+inRun+"\n") {
		t.Errorf("mst run does not say where its HTML report is:\n%s", runErr)
	}
	reportJSON, stderr, code := mstHTML(t, "report", runDir, "--json")
	if code != 0 {
		t.Fatalf("mst report --json exited %d: %s", code, stderr)
	}

	t.Run("run", func(t *testing.T) {
		p.Open(t, "file://"+inRun, `html[data-ready="1"]`)
		htmlreporttest.CheckNumbers(t, p, []byte(reportJSON))
		p.NoErrors(t)
	})

	t.Run("report --html", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "quickstart.html")
		stdout, stderr, code := mstHTML(t, "report", runDir, "--html", file)
		if code != 0 {
			t.Fatalf("mst report --html exited %d: %s", code, stderr)
		}
		if !strings.Contains(stderr, "html report: "+file) {
			t.Errorf("mst report --html does not say where the page is: %q", stderr)
		}
		if !strings.Contains(stdout, "Pass") && !strings.Contains(stdout, "PASS") {
			t.Errorf("mst report --html does not print the report as well:\n%s", stdout)
		}
		p.Open(t, "file://"+file, `html[data-ready="1"]`)
		htmlreporttest.CheckNumbers(t, p, []byte(reportJSON))
		// The quickstart's first case under its second variant: its
		// transcript shows the prompt and the weather server's tool call.
		htmlreporttest.OpenCell(t, p, 0, 1)
		shown := chromiumtest.Eval[string](t, p, `document.getElementById("viewer-body").textContent`)
		for _, want := range []string{"weather / wx_", "seen by the proxy", "Graders", "offline"} {
			if !strings.Contains(shown, want) {
				t.Errorf("the opened transcript does not show %q:\n%s", want, shown)
			}
		}
		p.Screenshot(t, "quickstart-report.png")
		p.NoErrors(t)
	})

	t.Run("report --html to a folder that does not exist", func(t *testing.T) {
		_, stderr, code := mstHTML(t, "report", runDir, "--html", filepath.Join(t.TempDir(), "no", "such", "r.html"))
		if code == 0 || !strings.Contains(stderr, "--html") {
			t.Errorf("mst report --html into a missing folder: exit %d, %q", code, stderr)
		}
	})

	t.Run("view", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		pr, pw := io.Pipe()
		done := make(chan int, 1)
		var stderr bytes.Buffer
		go func() {
			done <- cli.Main(ctx, []string{"view", runDir}, cli.Stdio{Out: pw, Err: &stderr, Env: os.Environ()})
			pw.Close()
		}()
		line, err := bufio.NewReader(pr).ReadString('\n')
		if err != nil {
			t.Fatalf("mst view printed no address: %v; stderr: %s; exit %v", err, stderr.String(), <-done)
		}
		go io.Copy(io.Discard, pr)
		url := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/`).FindString(line)
		if url == "" {
			t.Fatalf("mst view printed no http://127.0.0.1:PORT/ address: %q", line)
		}
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %s, %s", url, resp.Status, resp.Header.Get("Content-Type"))
		}
		// A page asked for by another name (a web site resolving to
		// 127.0.0.1) is refused.
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = "attacker.example"
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("GET with Host attacker.example: %s, want 421", resp.Status)
		}
		p.Open(t, url, `html[data-ready="1"]`)
		htmlreporttest.CheckNumbers(t, p, []byte(reportJSON))
		htmlreporttest.OpenCell(t, p, 1, 0)
		p.NoErrors(t)
		cancel() // Ctrl-C
		if code := <-done; code != 0 {
			t.Errorf("mst view exited %d on Ctrl-C: %s", code, stderr.String())
		}
	})

	t.Run("view bad port", func(t *testing.T) {
		_, stderr, code := mstHTML(t, "view", runDir, "--port", "70000")
		if code != int(cli.ExitUsage) || !strings.Contains(stderr, "--port 70000") {
			t.Errorf("mst view --port 70000: exit %d, %q", code, stderr)
		}
	})
}
