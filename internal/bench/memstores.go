package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The Memory Stores API of gitmem serve --stores, on loopback, as a
// client of the hosted service uses it: one client's creates and updates,
// and the upload of a whole store with many requests in flight (the
// TypeScript SDK's own store sync uploads 32 at a time, and budgets about
// 0.3 s an upload and 30 s a flush of a 2,000-memory store).

// msResult is the Memory Stores API's measurements.
type msResult struct {
	creates, updates []time.Duration // one client
	upload           []time.Duration // each create of the upload
	uploadWall       time.Duration   // the first request to the last answer
	uploaded         int
}

// memoryStores measures the Memory Stores API on a new folder of stores in
// dir.
func (rep *Report) memoryStores(ctx context.Context, dir string) error {
	cfg := rep.cfg
	stores := filepath.Join(dir, "stores")
	if err := os.MkdirAll(stores, 0o700); err != nil {
		return err
	}
	cmd := gitmemCmd(cfg, "serve", "--http", "127.0.0.1:0", "--stores", stores, "--max-memories", "0", maxFiles)
	s, err := startHTTPServer(cmd, true, gitmemAnnounce)
	if err != nil {
		return err
	}
	defer s.close()
	c := &msClient{base: strings.TrimSuffix(s.url, "/v1/tool_use"), http: s.client}
	res := &msResult{}
	one, err := c.store("one client")
	if err != nil {
		return err
	}
	content := strings.Repeat("A note the agent keeps about the user. ", 8) // about 300 bytes
	ids := make([]string, cfg.MSOps)
	for i := range cfg.MSOps {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		m, err := c.do("POST", "/v1/memory_stores/"+one+"/memories", map[string]any{"path": fmt.Sprintf("/notes/%04d.md", i), "content": content})
		if err != nil {
			return err
		}
		res.creates = append(res.creates, time.Since(t))
		ids[i] = m["id"].(string)
	}
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		if _, err := c.do("POST", "/v1/memory_stores/"+one+"/memories/"+id, map[string]any{"content": fmt.Sprintf("%s(updated %d)\n", content, i)}); err != nil {
			return err
		}
		res.updates = append(res.updates, time.Since(t))
	}
	cfg.logf("Memory Stores API: %d creates p50 %s p99 %s; updates p50 %s p99 %s", len(res.creates),
		ms(pct(res.creates, 50)), ms(pct(res.creates, 99)), ms(pct(res.updates, 50)), ms(pct(res.updates, 99)))

	up, err := c.store("upload")
	if err != nil {
		return err
	}
	next := make(chan int)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.MSInflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				_, err := c.do("POST", "/v1/memory_stores/"+up+"/memories", map[string]any{"path": fmt.Sprintf("/user/%02d/%04d.md", i%50, i), "content": content})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				res.upload = append(res.upload, time.Since(t))
				mu.Unlock()
			}
		}()
	}
	for i := range cfg.MSUpload {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	res.uploadWall, res.uploaded = time.Since(start), len(res.upload)
	if firstErr != nil {
		return fmt.Errorf("the upload: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg.logf("Memory Stores API: a store of %d memories uploaded, %d in flight, in %s (p50 %s, p99 %s a create)",
		res.uploaded, cfg.MSInflight, res.uploadWall.Round(time.Millisecond), ms(pct(res.upload, 50)), ms(pct(res.upload, 99)))
	rep.MemoryStores = res
	return nil
}

// msClient calls the Memory Stores API of a server without tokens.
type msClient struct {
	base string
	http *http.Client
}

func (c *msClient) store(name string) (string, error) {
	st, err := c.do("POST", "/v1/memory_stores", map[string]any{"name": name})
	if err != nil {
		return "", err
	}
	return st["id"].(string), nil
}

func (c *msClient) do(method, path string, body any) (map[string]any, error) {
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, path, res.StatusCode, bytes.TrimSpace(got))
	}
	var out map[string]any
	return out, json.Unmarshal(got, &out)
}

// msTable is the Memory Stores API's table.
func (rep *Report) msTable() table {
	r := rep.MemoryStores
	rate := func(n int, d time.Duration) string { return fmt.Sprintf("%.0f", float64(n)/d.Seconds()) }
	sum := func(ds []time.Duration) (t time.Duration) {
		for _, d := range ds {
			t += d
		}
		return t
	}
	return table{title: "Memory Stores API (gitmem serve --stores on loopback, about 300-byte memories)",
		header: []string{"what", "calls", "p50", "p99", "wall time", "calls/s"},
		rows: [][]string{
			{"create, one client", count(len(r.creates)), ms(pct(r.creates, 50)), ms(pct(r.creates, 99)), ms(sum(r.creates)), rate(len(r.creates), sum(r.creates))},
			{"update, one client", count(len(r.updates)), ms(pct(r.updates, 50)), ms(pct(r.updates, 99)), ms(sum(r.updates)), rate(len(r.updates), sum(r.updates))},
			{fmt.Sprintf("upload a store of %s memories, %d in flight", count(r.uploaded), rep.cfg.MSInflight), count(r.uploaded),
				ms(pct(r.upload, 50)), ms(pct(r.upload, 99)), ms(r.uploadWall), rate(r.uploaded, r.uploadWall)},
		}}
}
