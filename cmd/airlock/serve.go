package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
	"github.com/airlock-sandbox/airlock/server"
)

// hostFuncsFor returns the built-in host function set name ("" for none) and
// its option.
func hostFuncsFor(name string) ([]hostfuncs.Function, []airlock.Option, error) {
	if name == "" {
		return nil, nil, nil
	}
	set, ok := toolSets[name]
	if !ok {
		return nil, nil, usageError{fmt.Sprintf("--host-funcs %q: the only set is \"demo\"", name)}
	}
	fns := set()
	return fns, []airlock.Option{airlock.WithHostFuncs(fns...)}, nil
}

// sandboxFlags are the flags serve and mcp share: those that make their
// Sandbox.
type sandboxFlags struct {
	common    commonFlags
	maxima    maxFlags
	sessions  sessionFlags
	pkgs      packageFlags
	network   netFlags
	canaries  canaryFlags
	hostFuncs *string
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	f.hostFuncs = hostFuncsFlag(fs, "expose built-in host functions to Python: demo")
	f.common.register(fs)
	f.maxima.register(fs)
	f.sessions.register(fs)
	f.pkgs.register(fs)
	f.network.register(fs)
	f.canaries.register(fs)
}

// options checks the flags, in the order serve and mcp always did (so a
// command line with two bad flags names the same one), and returns the host functions, the Sandbox's options and the network policy
// (nil for none). more, if given, adds the command's own options after
// the network's.
func (f *sandboxFlags) options(more func() ([]airlock.Option, error)) ([]hostfuncs.Function, []airlock.Option, *airlock.NetworkPolicy, error) {
	fns, opts, err := hostFuncsFor(*f.hostFuncs)
	if err != nil {
		return nil, nil, nil, err
	}
	sessOpts, err := f.sessions.options()
	if err != nil {
		return nil, nil, nil, err
	}
	opts = append(opts, sessOpts...)
	netPolicy, err := f.network.policy()
	if err != nil {
		return nil, nil, nil, err
	}
	if netPolicy != nil {
		opts = append(opts, airlock.WithNetwork(*netPolicy))
	}
	if more != nil {
		moreOpts, err := more()
		if err != nil {
			return nil, nil, nil, err
		}
		opts = append(opts, moreOpts...)
	}
	canaryOpts, err := f.canaries.options()
	if err != nil {
		return nil, nil, nil, err
	}
	opts = append(opts, canaryOpts...)
	pkgOpts, err := f.pkgs.options()
	if err != nil {
		return nil, nil, nil, err
	}
	return fns, append(opts, pkgOpts...), netPolicy, nil
}

// serveFlags are airlock serve's flags.
type serveFlags struct {
	sandbox     sandboxFlags
	addr        *string
	concurrency *int
	queue       *int
	maxBody     sizeFlag
	memBudget   sizeFlag
	memClient   sizeFlag
	tokensFile  *string
	perClient   *int
	logJSON     *bool
	drain       *time.Duration
	maxConns    *int
	maxPerAddr  *int
	storeURL    *string
	keyFile     *string
	lease       *time.Duration
	noAuth      *bool
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.sandbox.register(fs)
	f.addr = fs.String("addr", "127.0.0.1:8080", "listen address (HOST:PORT)")
	f.concurrency = fs.Int("concurrency", 0, "runs at once (default: the number of CPUs)")
	f.queue = fs.Int("queue", 0, "requests that may wait for a slot before 429 (default: 4 × concurrency; -1: none)")
	f.logJSON = fs.Bool("log-json", false, "log JSON records instead of text")
	f.drain = fs.Duration("drain-timeout", 2*time.Minute, "on SIGINT/SIGTERM, how long to let admitted runs finish")
	f.maxConns = fs.Int("max-conns", server.DefaultMaxConns, "open connections at most; more are answered 503 and closed")
	f.maxPerAddr = fs.Int("max-conns-per-client", server.DefaultMaxConnsPerClient, "open connections at most from one client address")
	f.storeURL = fs.String("session-store", "", "where sessions live: empty for this process, or redis://[:PASSWORD@]HOST:PORT/DB shared by replicas (needs a session key; default: $AIRLOCK_SESSION_STORE)")
	f.keyFile = fs.String("session-key-file", "", "file holding the key (16+ bytes) that signs stored sessions, the same on every replica (default: $AIRLOCK_SESSION_KEY)")
	f.lease = fs.Duration("session-lease", server.DefaultRedisLease, "with a shared store: how long a call's lock on its session lasts unless renewed, so how long a replica that dies mid-call holds the session")
	f.noAuth = fs.Bool(flagUnauthenticatedNetwork, false, "serve without $AIRLOCK_TOKEN on an address beyond loopback (refused otherwise): anyone who reaches the port runs code")
	f.maxBody = sizeFlag{32 << 20}
	fs.Var(&f.maxBody, "max-body", "request body cap")
	fs.Var(&f.memBudget, "memory-budget", "memory the sessions hold between calls and the runs in flight (each its memory limit) may take together, e.g. 2GiB; past it idle sessions move to disk until their next call and runs wait, then get 429 (default 0: 60% of the container's memory.max, else GOMEMLIMIT, else physical memory)")
	f.tokensFile = fs.String("tokens-file", "", "file of client tokens, a line each: NAME TOKEN (# comments); each client's sessions are its own, within --max-sessions-per-client and --memory-per-client ($AIRLOCK_TOKEN, if set, is one more, named default)")
	f.perClient = fs.Int("max-sessions-per-client", -1, "with --tokens-file: sessions one client may hold at once, spilled ones included; 0: no cap but --max-sessions (default: a quarter of --max-sessions)")
	fs.Var(&f.memClient, "memory-per-client", "with --tokens-file: memory one client's sessions and runs in flight may hold, e.g. 1GiB (default 0: no quota but --memory-budget)")
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	var f serveFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock serve [flags]   (bearer token: $AIRLOCK_TOKEN)")
		printDefaults(fs)
	}
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	if fs.NArg() > 0 {
		return exitUsage, usageError{"serve takes no arguments"}
	}
	clients, err := readTokensFile(*f.tokensFile)
	if err != nil {
		return exitUsage, err
	}
	anyToken := os.Getenv("AIRLOCK_TOKEN")
	if anyToken == "" && len(clients) > 0 {
		anyToken = clients[0].Token
	}
	if err := checkListenAuth("--addr", *f.addr, anyToken, *f.noAuth); err != nil {
		return exitUsage, err
	}
	_, opts, netPolicy, err := f.sandbox.options(func() ([]airlock.Option, error) { return sessionKey(*f.storeURL, *f.keyFile) })
	if err != nil {
		return exitUsage, err
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if *f.logJSON {
		h = slog.NewJSONHandler(stderr, nil)
	}
	logger := slog.New(h)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	sb, err := f.sandbox.common.sandbox(ctx, stderr, opts...)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	store, err := openStore(ctx, *f.storeURL, *f.sandbox.sessions.ttl, *f.sandbox.sessions.max, *f.lease, logger)
	if err != nil {
		return 1, err
	}
	if store != nil {
		defer store.Close()
	}
	budget, budgetFrom := f.memBudget.n, "--memory-budget"
	if budget == 0 {
		budget, budgetFrom = server.DefaultMemoryBudget()
		budgetFrom = fmt.Sprintf("%.0f%% of %s", server.MemoryBudgetShare*100, budgetFrom)
	}
	perClient := *f.perClient
	if perClient < 0 {
		perClient = 0
		if len(clients) > 0 {
			perClient = max(sb.MaxSessions()/4, 1)
		}
	}
	srv, err := server.New(server.Config{
		Clients: clients, MaxSessionsPerClient: perClient, MemoryPerClient: f.memClient.n,
		MemoryBudget: budget,
		// The operator's GOMEMLIMIT is theirs to keep.
		ManageGoMemoryLimit: budget > 0 && os.Getenv("GOMEMLIMIT") == "",
		CountProcessMemory:  budget > 0,
		Sandbox:             sb, MaxLimits: f.sandbox.maxima.limits(), Concurrency: *f.concurrency, Queue: *f.queue,
		MaxBody: f.maxBody.n, Token: os.Getenv("AIRLOCK_TOKEN"), Logger: logger,
		MaxConns: *f.maxConns, MaxConnsPerClient: *f.maxPerAddr, Network: netPolicy, SessionStore: storeOrNil(store),
	})
	if err != nil {
		return 1, err
	}
	defer srv.Close() // removes spilled sessions on every way out
	ln, err := net.Listen("tcp", *f.addr)
	if err != nil {
		return 1, err
	}
	logger.Info("serving", slog.String("addr", "http://"+ln.Addr().String()), slog.Bool("snapshots", sb.Snapshots()),
		slog.Bool("auth", anyToken != ""), slog.Any("clients", clientNames(clients)), slog.String("sessions", storeName(store)),
		slog.String("memory_budget", budgetLog(budget, budgetFrom, store != nil)))
	return serveUntilSignal(ctx, srv, ln, *f.drain, logger)
}

// serveUntilSignal serves ln until srv fails or ctx ends (a signal), then
// lets the admitted runs finish within drain.
func serveUntilSignal(ctx context.Context, srv *server.Server, ln net.Listener, drain time.Duration, logger *slog.Logger) (int, error) {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return 1, err
	case <-ctx.Done():
	}
	logger.Info("shutting down: draining admitted runs", slog.Duration("timeout", drain))
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(dctx); err != nil {
		return 1, fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return 0, nil
}

// budgetLog says the sessions' memory budget and where it came from; a
// session store holds sessions between calls instead.
func budgetLog(budget int64, from string, stored bool) string {
	if stored {
		return "none needed (sessions live in the store between calls)"
	}
	return fmt.Sprintf("%s (%s)", (&sizeFlag{budget - budget%(1<<20)}).String(), from)
}

// mcpFlags are airlock mcp's flags.
type mcpFlags struct {
	sandbox    sandboxFlags
	parallel   *int
	maxMessage sizeFlag
	httpAddr   *string
	noAuth     *bool
	shared     *bool
	budget     sizeFlag
	tokensFile *string
	perClient  *int
	memClient  sizeFlag
}

func (f *mcpFlags) register(fs *flag.FlagSet) {
	f.sandbox.register(fs)
	f.parallel = fs.Int("concurrency", 0, "runs at once; further calls wait (default: CPUs)")
	f.httpAddr = fs.String("http", "", "serve MCP's streamable HTTP transport at http://`ADDR`/mcp instead of stdio (bearer token: $AIRLOCK_TOKEN)")
	f.noAuth = fs.Bool(flagUnauthenticatedNetwork, false, "with --http: serve without $AIRLOCK_TOKEN on an address beyond loopback (refused otherwise): anyone who reaches the port runs code")
	f.shared = fs.Bool("share-across-clients", false, "let every MCP client read any client's run resources and use or end any client's sessions (by default each client sees only what it made)")
	f.maxMessage = sizeFlag{server.DefaultMaxMessage}
	fs.Var(&f.maxMessage, "max-message", "largest message (one line) a client may send; longer ones are refused")
	fs.Var(&f.budget, "memory-budget", "memory the sessions may hold between calls, e.g. 2GiB; past it idle ones move to disk until their next call (default 0: 60% of the container's memory.max, else GOMEMLIMIT, else physical memory)")
	f.tokensFile = fs.String("tokens-file", "", "with --http: file of client tokens, a line each: NAME TOKEN (# comments), as serve's; each client's sessions and run resources are its own, shared by all its MCP sessions, within --max-sessions-per-client and --memory-per-client ($AIRLOCK_TOKEN, if set, is one more, named default)")
	f.perClient = fs.Int("max-sessions-per-client", -1, "sessions one client may hold at once, spilled ones included (a client: a token of --tokens-file, all its MCP sessions together; without one, one MCP session); 0: no cap but --max-sessions (default: a quarter of --max-sessions with --http, none over stdio)")
	fs.Var(&f.memClient, "memory-per-client", "memory one client's sessions and calls in flight may hold, e.g. 1GiB (a client as for --max-sessions-per-client; default 0: no quota but --memory-budget)")
}

func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	var f mcpFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock mcp [flags]   (Model Context Protocol over stdio, or --http; tools: run_python, end_session)")
		printDefaults(fs)
	}
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	if *f.tokensFile != "" && *f.httpAddr == "" {
		return exitUsage, usageError{"--tokens-file is for --http: over stdio there is one client"}
	}
	clients, err := readTokensFile(*f.tokensFile)
	if err != nil {
		return exitUsage, err
	}
	if *f.httpAddr != "" {
		anyToken := os.Getenv("AIRLOCK_TOKEN")
		if anyToken == "" && len(clients) > 0 {
			anyToken = clients[0].Token
		}
		if err := checkListenAuth("--http", *f.httpAddr, anyToken, *f.noAuth); err != nil {
			return exitUsage, err
		}
	}
	fns, opts, _, err := f.sandbox.options(nil)
	if err != nil {
		return exitUsage, err
	}
	sb, err := f.sandbox.common.sandbox(ctx, stderr, opts...)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	if *f.perClient < 0 {
		*f.perClient = 0
		if *f.httpAddr != "" {
			*f.perClient = max(sb.MaxSessions()/4, 1)
		}
	}
	// Spilled sessions are the guests' memory and files: a private
	// directory, gone at exit.
	spillDir, err := os.MkdirTemp("", "airlock-mcp-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(spillDir)
	// The soft limit NewMCP manages is process-wide: put back as found
	// (a test runs the command in its own process).
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	srv, err := server.NewMCP(server.MCPConfig{Sandbox: sb, HostFuncs: fns, MaxLimits: f.sandbox.maxima.limits(), Concurrency: *f.parallel, ShareAcrossClients: *f.shared,
		MemoryBudget: f.budget.n, SpillDir: spillDir, MaxSessionsPerClient: *f.perClient, MemoryPerClient: f.memClient.n,
		// The operator's GOMEMLIMIT is theirs to keep.
		ManageGoMemoryLimit: os.Getenv("GOMEMLIMIT") == ""})
	if err != nil {
		return exitUsage, err
	}
	if *f.httpAddr != "" {
		return serveMCPHTTP(ctx, srv, *f.httpAddr, f.maxMessage.n, clients, stderr)
	}
	// Not the SDK's IOTransport: one bad line there ends the server, and
	// the calls in flight with it.
	t := &server.LineTransport{Reader: stdin, Writer: stdout, MaxMessage: int(f.maxMessage.n), Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if err := srv.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return 1, err
	}
	return 0, nil
}

// serveMCPHTTP serves srv at http://addr/mcp until a signal, then lets
// the calls in flight finish (up to a minute).
func serveMCPHTTP(ctx context.Context, srv *mcp.Server, addr string, maxMessage int64, clients []server.ClientToken, stderr io.Writer) (int, error) {
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	token := os.Getenv("AIRLOCK_TOKEN")
	h, err := server.NewMCPHandler(srv, server.MCPHTTPConfig{Token: token, Clients: clients, MaxMessage: maxMessage, Logger: logger})
	if err != nil {
		// Named by client, never by token: a tokens file that names a
		// client twice, or gives two the same token.
		return exitUsage, usageError{fmt.Sprintf("--tokens-file: %v", err)}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return 1, err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger.Info("serving MCP", slog.String("url", "http://"+ln.Addr().String()+"/mcp"), slog.Bool("auth", token != "" || len(clients) > 0),
		slog.Any("clients", clientNames(clients)))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return 1, err
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := hs.Shutdown(dctx); err != nil {
		return 1, fmt.Errorf("shutdown: %w", err)
	}
	return 0, nil
}
