package handler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// screenNote is an ordinary memory note (no secret) of about size bytes,
// with the words that make the secret rules look (key, token, api, ://).
func screenNote(size int) string {
	para := "## Project notes\n" +
		"The API key lives in the vault under secret/billing/api-key; never paste it here.\n" +
		"Token budget: 4096 tokens per call. Dashboard: https://grafana.example.com/d/abc/latency?orgId=1\n" +
		"Key takeaway: ship the fix on Monday; Alice prefers short answers.\n" +
		"- [ ] review the PR for the auth service\n"
	return strings.Repeat(para, size/len(para)+1)[:size]
}

// BenchmarkCreateScreening is the cost of secret screening per write: a
// create of a new note through the handler, screening off and on (mask
// and refuse do the same work on a note without a secret).
//
//	go test ./handler -run '^$' -bench CreateScreening -benchtime 200x -count 6
func BenchmarkCreateScreening(b *testing.B) {
	for _, size := range []int{1 << 10, 10 << 10, 100 << 10} {
		for _, mode := range []policy.ScreenMode{policy.ScreenOff, policy.ScreenMask} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, mode), func(b *testing.B) {
				r := newRepo(b)
				h := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Screen: mode, Logger: testLog(b)})
				text := fmt.Sprintf("%q", screenNote(size))
				i := 0
				for b.Loop() {
					i++
					res := call(h, fmt.Sprintf("toolu_%d", i), fmt.Sprintf(`{"command":"create","path":"/memories/n%d.md","file_text":%s}`, i, text))
					if res.IsError {
						b.Fatal(res.Content)
					}
				}
			})
		}
	}
}
