package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPHTTPConfig configures NewMCPHandler.
type MCPHTTPConfig struct {
	// Token, when set, is the bearer token every request must carry.
	Token string
	// Clients are bearer tokens of clients told apart, as Config.Clients
	// for serve (Token, if set, is one more, named "default"): each
	// request's token names its client, and what the MCP server's tools
	// make (sessions, run resources) belongs to that client rather than
	// to the MCP session, so that all of one client's MCP sessions share
	// them, another client's find nothing, and MCPConfig's per-client
	// caps count all of a client's MCP sessions together. An MCP session
	// is bound to the client that opened it: another client's token on
	// it is refused (403).
	Clients []ClientToken
	// MaxMessage bounds a request body (default DefaultMaxMessage).
	MaxMessage int64
	// SessionTimeout ends an MCP session (the transport's, not a
	// run_python session) idle this long (default 30 min), so clients
	// that leave do not accumulate.
	SessionTimeout time.Duration
	// Logger receives the transport's records (default: none).
	Logger *slog.Logger
}

// NewMCPHandler serves srv over MCP's streamable HTTP transport, behind
// bearer tokens (cfg.Token, cfg.Clients); errors before the transport
// (401) are the JSON envelope. Requests on a loopback address naming
// another Host are refused (403), against DNS rebinding. Serve it with
// an http.Server that bounds header time and size (`airlock mcp --http`
// does).
//
// # Errors
// Clients that cannot be told apart: one without a name or token, a
// name or a token given twice; a client's token with white space in it.
// Errors name clients, never tokens.
func NewMCPHandler(srv *mcp.Server, cfg MCPHTTPConfig) (http.Handler, error) {
	clients, err := clientTokens("MCPHTTPConfig", cfg.Token, cfg.Clients)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clients {
		// The SDK's middleware, which carries the client's name, takes
		// "Bearer TOKEN" as two words: such a token would pass clientAuth
		// and then be refused.
		if strings.ContainsFunc(c.Token, unicode.IsSpace) {
			return nil, fmt.Errorf("server: client %q's token holds white space", c.Name)
		}
	}
	if clients != nil && strings.ContainsFunc(cfg.Token, unicode.IsSpace) {
		return nil, errors.New(`server: the token of client "default" (MCPHTTPConfig.Token) holds white space`)
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: cfg.MaxMessage, SessionTimeout: cfg.SessionTimeout, Logger: cfg.Logger,
	})
	if clients == nil {
		return bearerAuth(cfg.Token, h, func() {}), nil
	}
	// The SDK hands a request's TokenInfo to the tools (RequestExtra),
	// where the MCP server reads its client (ownerOf), and binds each MCP
	// session to the UserID that opened it. clientAuth has checked the
	// token by then; the SDK's middleware only carries the name.
	named := auth.RequireBearerToken(clientTokenInfo, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return clientAuth(clients, named(h), func() {}), nil
}

// clientTokenInfo is the TokenInfo of a request clientAuth let through:
// its client as the UserID.
func clientTokenInfo(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	c := clientOf(ctx)
	if c == "" {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: c}, nil
}

// MCPHandler is NewMCPHandler for a cfg without Clients, which cannot
// fail. Given Clients that NewMCPHandler refuses, it answers every
// request 500 with the reason (which names no token).
func MCPHandler(srv *mcp.Server, cfg MCPHTTPConfig) http.Handler {
	h, err := NewMCPHandler(srv, cfg)
	if err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
		})
	}
	return h
}
