package class

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/class/dashboard"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// ServeOptions are `class serve`'s inputs.
type ServeOptions struct {
	F       *cmdutil.Factory
	Class   string
	Listen  string
	Every   time.Duration
	Timeout time.Duration
	// Silent is the hub's (class.HubOptions): 0 its default, negative off.
	Silent time.Duration
	// Ready, when set, gets the page's address once it listens (tests).
	Ready func(url string)
}

// NewCmdServe builds `class serve`.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{F: f}
	cmd := &cobra.Command{
		Use:   "serve [NAME] [--listen ADDR]",
		Short: "A live page in the browser with every student's screen, who needs help first",
		Long: `Serve the class's dashboard: a local web page with one tile per student (name,
task, state, flags, the active pane's screen with its colours, the last event),
the students who may need help first, updated as their screens change. Enter
or a click on a tile opens the student's page: every pane, the Neovim buffer
with its diagnostics, the debugger, the events, the agents. It keeps one SSH
session open with each student's gate, as "stem-mcp class" does. The only
actions are the student page's hint in Neovim and keys to a pane the student
allows, when the student's grant has them (assist and up), each confirmed on
the page and audited by the student's gate.

The page listens on loopback (127.0.0.1, a free port) unless --listen names
another address, and only answers whoever holds the random token in the
address printed at start (as Jupyter does). Everything it needs is inside
stemctl: it works offline. Ctrl-C ends it. NAME may be left out when there is
one class.`,
		Example: `  stemctl class serve lab3
  stemctl class serve lab3 --listen 127.0.0.1:8080`,
		Args: cobra.MaximumNArgs(1),
		RunE: cmdutil.RunEOptional(&opts.Class, opts, runF, RunServe),
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:0", "address to listen on; other than loopback only when you mean it (the page shows every student's screen)")
	cmd.Flags().DurationVar(&opts.Every, "every", 500*time.Millisecond, "look at each student's screen this often")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", class.DefaultTimeout, "give up on one call to a student after this long")
	return cmd
}

// RunServe serves the dashboard until ctx ends.
func RunServe(ctx context.Context, opts *ServeOptions) error {
	if opts.Every <= 0 {
		return cmdutil.FlagErrorf("--every must be positive")
	}
	r, err := loadClass(opts.F, opts.Class)
	if err != nil {
		return err
	}
	loopback, err := isLoopback(opts.Listen)
	if err != nil {
		return cmdutil.FlagErrorf("--listen %q: %v", opts.Listen, err)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.Listen, err)
	}
	defer ln.Close()
	token, err := dashboard.NewToken()
	if err != nil {
		return err
	}
	names := make([]string, len(r.Students))
	for i, s := range r.Students {
		names[i] = s.Name
	}
	board := dashboard.NewBoard(names)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One session with each student's gate, as stem-mcp class keeps: the
	// tiles, the student page and its actions all go through it.
	hub := class.NewHub(r.Students, class.HubOptions{Options: class.Options{Resolve: resolver(opts.F, r), Timeout: opts.Timeout}, Silent: opts.Silent})
	live := dashboard.NewLive(names, hub, board, dashboard.LiveOptions{Every: opts.Every, Timeout: opts.Timeout})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); hub.Run(ctx) }()
		go func() { defer wg.Done(); live.Run(ctx) }()
		wg.Wait()
	}()
	handler := dashboard.NewServer(board, token, r.Name)
	handler.Students = hub
	// Streams end with ctx: Shutdown does not wait for them.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	url := fmt.Sprintf("http://%s/?token=%s", ln.Addr(), token)
	ios := opts.F.IOStreams
	if !loopback {
		fmt.Fprintf(ios.ErrOut, "warning: --listen %s is not loopback: anyone on that network who gets the address with its token sees every student's screen, and the page is plain HTTP (no TLS)\n", opts.Listen)
	}
	fmt.Fprintf(ios.Out, "class %s: %d students\nOpen the dashboard (the token is the key; keep it to yourself):\n  %s\nCtrl-C ends it.\n", r.Name, len(names), url)
	if opts.Ready != nil {
		opts.Ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		cancel()
		<-done
		return fmt.Errorf("serve the dashboard: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	srv.Shutdown(sctx)
	// The hub kills its ssh processes when ctx ends; the wait is bounded
	// all the same, so no student's connection holds the exit.
	waitBounded(done)
	if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// isLoopback says whether addr (host:port) listens on loopback only.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false, nil // a name may resolve anywhere
	}
	return ip.IsLoopback(), nil
}
