package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/airlock-sandbox/airlock/server"
)

// readTokensFile reads the --tokens-file of serve and mcp --http: a
// client a line, NAME TOKEN, blank lines and # comments skipped. Errors
// name the line and the client, never a token.
func readTokensFile(path string) ([]server.ClientToken, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError{fmt.Sprintf("--tokens-file: %v", err)}
	}
	defer f.Close()
	var out []server.ClientToken
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, usageError{fmt.Sprintf("--tokens-file %s:%d: want NAME TOKEN, found %d fields", path, n, len(fields))}
		}
		if len(fields[1]) < 16 {
			return nil, usageError{fmt.Sprintf("--tokens-file %s:%d: client %q's token is shorter than 16 characters", path, n, fields[0])}
		}
		out = append(out, server.ClientToken{Name: fields[0], Token: fields[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, usageError{fmt.Sprintf("--tokens-file: %v", err)}
	}
	if len(out) == 0 {
		return nil, usageError{fmt.Sprintf("--tokens-file %s: no clients in it", path)}
	}
	return out, nil
}

// clientNames lists the clients for the log, without their tokens.
func clientNames(clients []server.ClientToken) []string {
	names := make([]string, len(clients))
	for i, c := range clients {
		names[i] = c.Name
	}
	return names
}
