package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// postCall sends one memory tool call to a serve --http at base; it
// reports whether the call was acknowledged (a result that is no error).
func postCall(client *http.Client, base, id, input string) (ok bool, err error) {
	body := fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"memory","input":%s}`, id, input)
	req, _ := http.NewRequest("POST", base+"/v1/tool_use", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		n, rerr := res.Body.Read(buf)
		out.Write(buf[:n])
		if rerr != nil {
			break
		}
	}
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %d: %s", res.StatusCode, out.String())
	}
	return !strings.Contains(out.String(), `"is_error":true`), nil
}

// serve stopped with SIGTERM in the middle of a 64-client HTTP load
// exits 0 and leaves git's view whole: every file is as HEAD has it and
// .git/index says so (git status --porcelain is empty), and git fsck is
// clean. (Issue 21, item 17: 3 of 6 runs left 64-172 files listed as
// modified that were identical to HEAD. The cause, an index written
// beside the materialiser, is pinned deterministically by
// gitmem.TestIndexNeverVouchesForAFileNotYetWritten; here it shows only
// when the disk makes the materialiser lag.) One run edits each client's
// own files (views and inserts), one runs the load test's mix.
func TestServeStoppedUnderLoadLeavesACleanIndex(t *testing.T) {
	gittest.Long(t, "a server and 64 clients, twice")
	if testing.Short() {
		t.Skip("starts a server and 64 clients")
	}
	env := testEnv(t)
	for run := range 2 {
		repo := filepath.Join(gittest.TempDir(t), "memory")
		base, stop := serveHTTPProcess(t, env, repo, "--http", "--adopt-every", "0", "--log-level", "warn")
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: time.Minute}
		var acked atomic.Int64
		var wg sync.WaitGroup
		for c := range 64 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(c), uint64(run)))
				for i := 0; ; i++ {
					var input string
					f := fmt.Sprintf("/memories/c%d/n%d.md", c, i%32)
					switch {
					case run%2 == 1: // the load test's mix: shared files created, edited, deleted, renamed
						b, _ := json.Marshal(loadCall(rng, c, i))
						input = string(b)
					case i < 32:
						input = fmt.Sprintf(`{"command":"create","path":%q,"file_text":"client %d note %d\n"}`, f, c, i)
					case i%3 == 0:
						input = fmt.Sprintf(`{"command":"view","path":%q}`, f)
					default:
						input = fmt.Sprintf(`{"command":"insert","path":%q,"insert_line":1,"insert_text":"inserted %d\n"}`, f, i)
					}
					ok, err := postCall(client, base, fmt.Sprintf("toolu_r%d_c%d_%d", run, c, i), input)
					if err != nil {
						return // the server is going away
					}
					if ok {
						acked.Add(1)
					}
				}
			})
		}
		for acked.Load() < 6000 {
			time.Sleep(20 * time.Millisecond)
		}
		stop() // SIGTERM while the 64 clients go on; it must exit 0
		wg.Wait()
		if st := gittest.Git(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
			n := strings.Count(st, "\n")
			t.Errorf("run %d: git status lists %d file(s) after serve exited (%d calls acknowledged):\n%.2000s", run, n, acked.Load(), st)
		}
		gittest.Fsck(t, repo)
		t.Logf("run %d: %d calls acknowledged, %s commits", run, acked.Load(), strings.TrimSpace(gittest.Git(t, repo, "rev-list", "--count", "HEAD")))
	}
}
