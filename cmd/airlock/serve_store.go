package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server"
)

// sessionKey reads the key that signs stored sessions. A shared store
// requires one: without it, anyone who can write to the store could raise
// a session's limits or plant state.
func sessionKey(storeURL, keyFile string) ([]airlock.Option, error) {
	if storeURL == "" {
		storeURL = os.Getenv("AIRLOCK_SESSION_STORE")
	}
	var key []byte
	switch {
	case keyFile != "":
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("--session-key-file: %w", err)
		}
		key = bytes.TrimRight(b, "\r\n") // a key file usually ends in a newline
	case os.Getenv("AIRLOCK_SESSION_KEY") != "":
		key = []byte(os.Getenv("AIRLOCK_SESSION_KEY"))
	}
	if storeURL != "" && storeURL != "local" && key == nil {
		return nil, usageError{"--session-store " + redactURL(storeURL) + " needs a session key, the same on every replica: --session-key-file FILE or $AIRLOCK_SESSION_KEY (16 bytes or more), so that what is written into the store cannot raise a session's limits or forge its state"}
	}
	if key == nil {
		return nil, nil
	}
	if len(key) < 16 {
		return nil, usageError{fmt.Sprintf("the session key is %d bytes; it must be at least 16", len(key))}
	}
	return []airlock.Option{airlock.WithSessionKey(key)}, nil
}

// openStore opens --session-store: nil for sessions in this process.
func openStore(ctx context.Context, storeURL string, ttl time.Duration, max int, lease time.Duration, logger *slog.Logger) (*server.RedisStore, error) {
	if storeURL == "" {
		storeURL = os.Getenv("AIRLOCK_SESSION_STORE")
	}
	if storeURL == "" || storeURL == "local" {
		return nil, nil
	}
	if !strings.HasPrefix(storeURL, "redis://") && !strings.HasPrefix(storeURL, "rediss://") && !strings.HasPrefix(storeURL, "unix://") {
		return nil, usageError{"--session-store " + redactURL(storeURL) + ": want redis://HOST:PORT/DB (or rediss://, unix://), or empty for this process"}
	}
	if lease <= 0 {
		return nil, usageError{"--session-lease must be positive"}
	}
	return server.NewRedisStore(ctx, server.RedisOptions{URL: storeURL, TTL: ttl, MaxSessions: max, Lease: lease, Logger: logger})
}

// storeOrNil keeps a nil *RedisStore from becoming a non-nil interface.
func storeOrNil(s *server.RedisStore) server.SessionStore {
	if s == nil {
		return nil
	}
	return s
}

func storeName(s *server.RedisStore) string {
	if s == nil {
		return "in-process"
	}
	return s.Name()
}

// redactURL drops a password from a store URL shown in an error.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
