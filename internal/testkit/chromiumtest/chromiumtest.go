// Package chromiumtest opens pages in a real headless Chromium (Debian's
// chromium package) for tests, through the DevTools protocol
// (github.com/chromedp/chromedp), and records what the page wrote to its
// console. A test that needs Chromium fails under CI=true when it is
// missing, and skips elsewhere; MST_CHROMIUM names another binary.
package chromiumtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mst-eval/mst/internal/testkit/testneed"
)

// Binary returns the Chromium to run (MST_CHROMIUM, or one on PATH); when
// there is none it stops t as testneed.Missing does (a failure under CI, a
// skip elsewhere).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testneed.Missing(t, "Chromium is not installed: apt-get install chromium, or set MST_CHROMIUM to a Chromium binary")
	return ""
}

// Page is one tab of a browser of its own.
type Page struct {
	Ctx context.Context
	mu  sync.Mutex
	log []chromedp.ConsoleMessage
}

// New starts a headless Chromium with a fresh profile and opens a tab; both
// end with the test.
func New(t testing.TB) *Page {
	t.Helper()
	bin := Binary(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	p := &Page{Ctx: ctx}
	messages := chromedp.Console(ctx) // starts the browser; subscribes before any page runs
	started := make(chan struct{})
	go func() {
		close(started)
		for m, err := range messages {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.log = append(p.log, m)
			p.mu.Unlock()
		}
	}()
	<-started
	return p
}

// Open navigates to url and waits until the page's element matched by
// ready is in the page; it returns how long that took.
func (p *Page) Open(t testing.TB, url, ready string) time.Duration {
	t.Helper()
	start := time.Now()
	if err := chromedp.Do(p.Ctx, chromedp.Navigate(url), chromedp.WaitReady(ready)); err != nil {
		t.Fatalf("opening %s in Chromium: %v", url, err)
	}
	return time.Since(start)
}

// Console returns what the page has written to its console so far:
// console calls, uncaught exceptions and the browser's log (a blocked
// request, a Content-Security-Policy violation).
func (p *Page) Console() []chromedp.ConsoleMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), p.log...)
}

// NoErrors fails t for every error, warning and exception the page wrote.
func (p *Page) NoErrors(t testing.TB) {
	t.Helper()
	for _, m := range p.Console() {
		switch m.Type {
		case chromedp.ConsoleError, chromedp.ConsoleException, chromedp.ConsoleWarning:
			t.Errorf("the page wrote to the console: %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line)
		}
	}
}

// Eval runs a JavaScript expression in the page and decodes its value.
func Eval[T any](t testing.TB, p *Page, expr string) T {
	t.Helper()
	v, err := chromedp.Run(p.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Click clicks the element a CSS selector finds, as a person would.
func (p *Page) Click(t testing.TB, sel string) {
	t.Helper()
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}

// WaitVisible waits until the element a CSS selector finds is visible.
func (p *Page) WaitVisible(t testing.TB, sel string) {
	t.Helper()
	if err := chromedp.Do(p.Ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("waiting for %s: %v", sel, err)
	}
}

// Resize makes the page's viewport width × height CSS pixels, as a
// window of that size (or a phone's screen: 390 wide) shows it, until the
// next Resize.
func (p *Page) Resize(t testing.TB, width, height int64) {
	t.Helper()
	if err := chromedp.Do(p.Ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatalf("resizing the page to %d×%d: %v", width, height, err)
	}
}

// Screenshot writes a PNG of what the window shows as name into the test's
// artifact folder: $MST_ARTIFACTS when set (the CI keeps it), else
// t.ArtifactDir() (kept with go test -artifacts). It logs the path.
func (p *Page) Screenshot(t *testing.T, name string) string {
	t.Helper()
	return p.save(t, name, chromedp.CaptureScreenshot())
}

// FullScreenshot is Screenshot of the whole page, below the window's
// bottom edge too, at the window's width.
func (p *Page) FullScreenshot(t *testing.T, name string) string {
	t.Helper()
	return p.save(t, name, chromedp.FullScreenshot(100))
}

func (p *Page) save(t *testing.T, name string, shot chromedp.Action[[]byte]) string {
	t.Helper()
	png, err := chromedp.Run(p.Ctx, shot)
	if err != nil {
		t.Fatalf("taking a screenshot: %v", err)
	}
	dir := os.Getenv("MST_ARTIFACTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}
