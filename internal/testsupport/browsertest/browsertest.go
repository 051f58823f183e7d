// Package browsertest drives one headless Chromium tab for tests (through
// chromedp): the web UI's browser tests and the bench report's UI scale
// row share it. Tests skip under -short and fail, not skip, when Chromium
// is missing: run .ci/ensure-chromium.sh. TALON_CHROMIUM names another
// Chromium binary; TALON_UI_SCREENSHOTS names a directory to save
// screenshots in.
//
// A Browser belongs to the test that made it and is closed by its
// cleanup; its methods report failure with t.Fatalf, so they must run on
// the test's own goroutine.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// DefaultTimeout bounds every wait for the page unless Browser.Timeout
// says otherwise.
const DefaultTimeout = 25 * time.Second

// Chromium returns the Chromium binary, failing t when there is none and
// skipping it under -short.
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: runs headless Chromium against a coordinator on loopback")
	}
	p := os.Getenv("TALON_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("headless Chromium is required for the UI browser tests and %s is not usable (%v): run .ci/ensure-chromium.sh (as root) to install it, or set TALON_CHROMIUM to a Chromium binary", p, err)
	}
	return p
}

// Browser is one headless Chromium tab.
type Browser struct {
	t   testing.TB
	ctx context.Context
	// Timeout bounds each wait and evaluation; New sets DefaultTimeout.
	Timeout time.Duration

	mu       sync.Mutex // guards problems
	problems []string   // exceptions, CSP violations, script errors
}

// New starts Chromium bin with a 1280x900 window (closed at cleanup,
// which fails t if the page logged an exception, a CSP violation or a
// script error). Start it after the server it loads, so that it is closed
// before that server.
func New(t testing.TB, bin string) *Browser {
	t.Helper()
	actx, acancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		// The network is closed: without these Chromium stalls on
		// background fetches.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(actx)
	b := &Browser{t: t, ctx: ctx, Timeout: DefaultTimeout}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		acancel()
		t.Fatalf("starting Chromium %s: %v (run .ci/ensure-chromium.sh to install a working one)", bin, err)
	}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			// Failed API requests (401, 503) are expected and logged by
			// the browser under "network"; anything from the page's script
			// or the CSP is a bug.
			if m.IsException() || m.Source == "security" || m.Source == "javascript" || m.Type == chromedp.ConsoleError && m.Source == "" {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		acancel()
		<-done
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Errorf("browser console: %s", p)
		}
	})
	return b
}

// Do runs steps, failing the test with the page's text when one fails.
func (b *Browser) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\npage text:\n%s", what, err, b.PageText())
	}
}

// Eval evaluates a JavaScript expression in the page into a T.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// PageText is the visible text of the page, for failure messages.
func (b *Browser) PageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return fmt.Sprintf("(unavailable: %v)", err)
	}
	if len(s) > 4000 {
		s = s[:4000] + "..."
	}
	return s
}

// WaitFor polls a boolean JavaScript expression until it is true.
func (b *Browser) WaitFor(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(b.Timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out after %s waiting for %s (%s; last error %v)\npage text:\n%s", b.Timeout, what, expr, err, b.PageText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Screenshot saves a full-page PNG when TALON_UI_SCREENSHOTS names a
// directory.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("TALON_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.Timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}
