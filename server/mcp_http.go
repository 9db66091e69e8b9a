package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPHTTPConfig configures MCPHandler.
type MCPHTTPConfig struct {
	// Token, when set, is the bearer token every request must carry.
	Token string
	// MaxMessage bounds a request body (default DefaultMaxMessage).
	MaxMessage int64
	// SessionTimeout ends an MCP session (the transport's, not a
	// run_python session) idle this long (default 30 min), so clients
	// that leave do not accumulate.
	SessionTimeout time.Duration
	// Logger receives the transport's records (default: none).
	Logger *slog.Logger
}

// MCPHandler serves srv over MCP's streamable HTTP transport, behind a
// bearer token; errors before the transport (401) are the JSON envelope.
// Requests on a loopback address naming another Host are refused (403), against DNS
// rebinding. Serve it with an http.Server that bounds header time and
// size (`airlock mcp --http` does).
func MCPHandler(srv *mcp.Server, cfg MCPHTTPConfig) http.Handler {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: cfg.MaxMessage, SessionTimeout: cfg.SessionTimeout, Logger: cfg.Logger,
	})
	return bearerAuth(cfg.Token, h, func() {})
}
