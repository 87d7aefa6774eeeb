package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// Every HTTP server gitmem runs is built by handler.HTTPOptions.Server,
// with its bounds on a connection: headers far past 64 KiB get 431 (a
// bare http.Server would read up to 1 MiB of them).
func TestServeHTTPBoundsConnections(t *testing.T) {
	env := testEnv(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"http", []string{"--http"}},
		{"mcp-http", []string{"--mcp-http"}},
		{"stores", []string{"--http", "--stores", filepath.Join(t.TempDir(), "stores")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := filepath.Join(t.TempDir(), "memory")
			base, stop := serveHTTPProcess(t, env, repo, tc.args[0], tc.args[1:]...)
			defer stop()
			req, _ := http.NewRequest("GET", base+"/healthz", nil)
			req.Header.Set("X-Big", strings.Repeat("a", 128<<10))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("128 KiB of headers: %d", res.StatusCode)
			}
		})
	}
}
