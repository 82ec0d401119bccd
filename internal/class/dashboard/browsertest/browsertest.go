// Package browsertest drives Debian's headless chromium over the DevTools
// protocol for the dashboard's tests: wait for what the page shows, read
// its DOM, take screenshots.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium is the browser's path; a test that needs it fails when it is
// missing (scripts/setup.sh installs it) and is skipped under -short.
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a real headless chromium")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: scripts/setup.sh installs it (Debian's chromium)")
	return ""
}

// MaxLife bounds one browser's life.
const MaxLife = 3 * time.Minute

// Browser is one headless chromium with one tab, ended with the test.
type Browser struct {
	t   testing.TB
	ctx context.Context
}

// New starts chromium (bin) with a window of width x height.
func New(t testing.TB, bin string, width, height int) *Browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height), chromedp.Env("HOME="+t.TempDir()),
		// Chromium leaves its org.chromium.Chromium.* directories in $TMPDIR.
		chromedp.Env("TMPDIR="+t.TempDir()))
	// A page stuck in a dialog (an alert that ran) answers no call: the
	// whole browser ends after MaxLife whatever it is doing.
	life, lcancel := context.WithTimeout(context.Background(), MaxLife)
	actx, acancel := chromedp.NewExecAllocator(life, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel(); lcancel() })
	// The first run starts the browser, which lives as long as that
	// run's context: no timeout on it (go test's own bounds a hang).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &Browser{t: t, ctx: ctx}
}

// Do runs actions within d.
func (b *Browser) Do(d time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// run runs one action with a value within d.
func run[T any](b *Browser, d time.Duration, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// Open loads url.
func (b *Browser) Open(url string) {
	b.t.Helper()
	if err := b.Do(30*time.Second, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("open %s: %v", url, err)
	}
}

// Wait waits until the JavaScript expression js is true in the page
// (checked at each animation frame), or fails after d with the DOM.
func (b *Browser) Wait(js string, d time.Duration) {
	b.t.Helper()
	ok, err := run(b, d+5*time.Second, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(d)))
	if err != nil || !ok {
		b.t.Fatalf("the page did not get to %s within %v: %v\n%s", js, d, err, b.HTML())
	}
}

// Eval evaluates js in the page.
func Eval[T any](b *Browser, js string) T {
	b.t.Helper()
	v, err := run(b, 30*time.Second, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// HTML is the page's DOM now.
func (b *Browser) HTML() string {
	s, err := run(b, 30*time.Second, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		return fmt.Sprintf("(no DOM: %v)", err)
	}
	return s
}

// Screenshot saves the viewport as a PNG at path.
func (b *Browser) Screenshot(path string) {
	b.t.Helper()
	png, err := run(b, 30*time.Second, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
