package handler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

const (
	rpcInitialize  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	rpcInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// rpcCall is a tools/call of the memory tool with id and input (JSON),
// without a tool_use id in its _meta.
func rpcCall(id int, input string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory","arguments":%s}}`, id, input)
}

func rpcCancel(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"the user stopped it"}}`, id)
}

// rpcAnswer is a tools/call's answer as a tool_result.
type rpcAnswer struct {
	ID     int `json:"id"`
	Result struct {
		Meta    map[string]string `json:"_meta"`
		Content []struct{ Text string }
		IsError bool
	}
}

func (a rpcAnswer) text() string {
	if len(a.Result.Content) != 1 {
		return fmt.Sprintf("(%d content blocks)", len(a.Result.Content))
	}
	return a.Result.Content[0].Text
}

// stdioSession runs h.ServeMCP on pipes and returns a function that sends
// lines (without waiting) and one that reads the next answer.
func stdioSession(t *testing.T, h *handler.Handler) (send func(lines ...string), next func() string) {
	t.Helper()
	toServer, fromServer := pipes(t, func(in io.Reader, out io.Writer) error {
		return h.ServeMCP(context.Background(), in, out, handler.Caller{}, handler.MCPOptions{})
	})
	sent := make(chan error, 100)
	send = func(lines ...string) {
		go func() { _, err := io.WriteString(toServer, strings.Join(lines, "\n")+"\n"); sent <- err }()
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	// Answers the test did not read do not hold the server up as it ends.
	t.Cleanup(func() { go io.Copy(io.Discard, fromServer) })
	scan := bufio.NewScanner(fromServer)
	scan.Buffer(nil, 1<<20)
	next = func() string {
		t.Helper()
		if !scan.Scan() {
			t.Fatalf("the session ended: %v", scan.Err())
		}
		return scan.Text()
	}
	send(rpcInitialize, rpcInitialized)
	if got := next(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":0,"result":`) {
		t.Fatalf("initialize: %s", got)
	}
	return send, next
}

func answer(t *testing.T, line string) rpcAnswer {
	t.Helper()
	var a rpcAnswer
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	return a
}

// A client that pipelines its calls over stdio (sends a view right after
// the writes before it, without waiting for their answers) gets them run,
// and answered, in the order it sent them: every view sees every write
// sent before it.
func TestMCPStdioPipelinedCallsRunInOrder(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	send, next := stdioSession(t, h)
	const n = 20
	var lines []string
	for i := range n {
		lines = append(lines,
			rpcCall(1+3*i, fmt.Sprintf(`{"command":"create","path":"/memories/f%d.md","file_text":"one\n"}`, i)),
			rpcCall(2+3*i, fmt.Sprintf(`{"command":"insert","path":"/memories/f%d.md","insert_line":1,"insert_text":"two"}`, i)),
			rpcCall(3+3*i, fmt.Sprintf(`{"command":"view","path":"/memories/f%d.md"}`, i)))
	}
	send(lines...) // all at once
	order, wrong := []int{}, 0
	for range 3 * n {
		a := answer(t, next())
		order = append(order, a.ID)
		if a.ID%3 != 0 {
			continue
		}
		i := a.ID/3 - 1
		want := fmt.Sprintf("Here's the content of /memories/f%d.md with line numbers:\n     1\tone\n     2\ttwo\n     3\t", i)
		if a.Result.IsError || a.text() != want {
			wrong++
			t.Errorf("view %d: %q", i, a.text())
		}
	}
	for i, id := range order {
		if id != i+1 {
			t.Fatalf("answered in the order %v", order)
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d views ran before the writes sent before them", wrong, n)
	}
}

// holdWriter holds the repository's writer lock until the returned
// function is called: calls that change the memory wait meanwhile.
func holdWriter(t *testing.T, repo *gitmem.Repo) (release func()) {
	t.Helper()
	held, free, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		repo.Update(context.Background(), gitmem.Meta{Subject: "test: hold the writer lock"}, func(*gitmem.Tx) error {
			close(held)
			<-free
			return errors.New("held only")
		})
	}()
	<-held
	once := false
	release = func() {
		if !once {
			once = true
			close(free)
			<-done
		}
	}
	t.Cleanup(release)
	return release
}

// A call the client cancels before its change is committed is not
// applied: one cancelled while it waits for the store, and one cancelled
// before its turn came (it was sent while another call was running).
// Neither gets an answer (MCP: a cancelled request gets none). Their
// retries are applied, once each.
func TestMCPStdioCancelledCallIsNotApplied(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	if res := call(h, "toolu_setup", `{"command":"create","path":"/memories/todo.md","file_text":"one\n"}`); res.IsError {
		t.Fatal(res.Content)
	}
	head, _ := repo.Commit(context.Background(), "HEAD")
	send, next := stdioSession(t, h)
	release := holdWriter(t, repo)
	insertA := `{"command":"insert","path":"/memories/todo.md","insert_line":1,"insert_text":"A"}`
	insertB := `{"command":"insert","path":"/memories/todo.md","insert_line":1,"insert_text":"B"}`
	send(rpcCall(1, insertA), rpcCall(2, insertB), rpcCancel(2), rpcCancel(1))
	// A line that is not JSON is answered by the transport at once, after
	// it has taken the lines before it in.
	send("not json")
	for line := next(); !strings.Contains(line, `"code":-32700`); line = next() {
		t.Errorf("a cancelled call was answered: %s", line)
	}
	release()
	send(rpcCall(3, `{"command":"view","path":"/memories/todo.md"}`))
	a := answer(t, next())
	for ; a.ID != 3; a = answer(t, next()) {
		t.Errorf("a cancelled call was answered: %+v", a)
	}
	if a.text() != "Here's the content of /memories/todo.md with line numbers:\n     1\tone\n     2\t" {
		t.Errorf("the view after the cancelled calls: %q", a.text())
	}
	if commits := commitsSince(t, repo, head.Hash); len(commits) != 0 {
		t.Fatalf("cancelled calls committed: %+v", commits)
	}
	// The retries: each applied once.
	send(rpcCall(4, insertA), rpcCall(5, insertB), rpcCall(6, `{"command":"view","path":"/memories/todo.md"}`))
	for _, want := range []string{"The file /memories/todo.md has been edited.", "The file /memories/todo.md has been edited.",
		"Here's the content of /memories/todo.md with line numbers:\n     1\tone\n     2\tB\n     3\tA\n     4\t"} {
		if a := answer(t, next()); a.text() != want {
			t.Errorf("answer %d: %q, want %q", a.ID, a.text(), want)
		}
	}
	if commits := commitsSince(t, repo, head.Hash); len(commits) != 2 {
		t.Errorf("%d commits for two retried inserts", len(commits))
	}
	gittest.Fsck(t, repo.Dir())
}

// A call cancelled after its change was committed stays applied; a retry
// without a tool_use id (the same call) is answered from that commit, not
// applied twice, whatever other calls came in between. Once retried, the
// same insert is a new one.
func TestMCPStdioRetryOfCancelledCallAppliesOnce(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	send, next := stdioSession(t, h)
	send(rpcCall(1, `{"command":"create","path":"/memories/log.md","file_text":"start\n"}`))
	next()
	head, _ := repo.Commit(context.Background(), "HEAD")
	insert := `{"command":"insert","path":"/memories/log.md","insert_line":0,"insert_text":"step"}`
	send(rpcCall(2, insert))
	first := answer(t, next())
	send(rpcCancel(2), rpcCall(3, insert)) // the answer came too late: the client gave up, and retries
	retry := answer(t, next())
	if retry.ID != 3 || retry.text() != "The file /memories/log.md has been edited." || retry.Result.Meta["tool_use_id"] != first.Result.Meta["tool_use_id"] {
		t.Errorf("the retry: %+v, the first: %+v", retry, first)
	}
	if commits := commitsSince(t, repo, head.Hash); len(commits) != 1 {
		t.Errorf("%d commits for one insert and its retry", len(commits))
	}
	send(rpcCall(4, insert))
	first = answer(t, next())
	// A view between the cancel and the retry: the retry is still one.
	send(rpcCancel(4), rpcCall(5, `{"command":"view","path":"/memories/log.md"}`), rpcCall(6, insert), rpcCall(7, insert))
	for _, want := range []string{"Here's the content of /memories/log.md with line numbers:\n     1\tstep\n     2\tstep\n     3\tstart\n     4\t",
		"The file /memories/log.md has been edited.", "The file /memories/log.md has been edited."} {
		a := answer(t, next())
		if a.text() != want {
			t.Errorf("answer %d: %q, want %q", a.ID, a.text(), want)
		}
		if id := a.Result.Meta["tool_use_id"]; (a.ID == 6) != (id == first.Result.Meta["tool_use_id"]) {
			t.Errorf("answer %d ran under %s (the cancelled call's: %s): only the retry, 6, takes its id", a.ID, id, first.Result.Meta["tool_use_id"])
		}
	}
	if commits := commitsSince(t, repo, head.Hash); len(commits) != 3 {
		t.Errorf("%d commits for three inserts", len(commits))
	}
	gittest.Fsck(t, repo.Dir())
}

// A burst of calls, all cancelled, then all retried (finding N1 of the
// attacker pass: 200 calls, 200 cancels, 200 retries; the calls that had
// committed before their cancel came were applied twice). The first call
// is answered before the cancels are sent: it committed, and more than 64
// calls were sent after it. Whichever others ran before their cancel, and
// whichever were dropped, each insert is in the file once, and there is
// one commit per insert.
func TestMCPStdioBurstCancelledAndRetriedAppliesEachOnce(t *testing.T) {
	h, repo := newHandler(t, policy.DefaultLimits)
	send, next := stdioSession(t, h)
	send(rpcCall(1, `{"command":"create","path":"/memories/d.md","file_text":"start\n"}`))
	next()
	head, _ := repo.Commit(context.Background(), "HEAD")
	const n = 100
	insert := func(k int) string {
		return fmt.Sprintf(`{"command":"insert","path":"/memories/d.md","insert_line":1,"insert_text":"burst %d"}`, k)
	}
	var burst, cancels, retries []string
	for k := range n {
		burst = append(burst, rpcCall(10+k, insert(k)))
		cancels = append(cancels, rpcCancel(10+k))
		retries = append(retries, rpcCall(10+n+k, insert(k)))
	}
	send(burst...)
	if a := answer(t, next()); a.ID != 10 || a.Result.IsError {
		t.Fatalf("the first call: %+v", a)
	}
	send(cancels...)
	send(retries...)
	send(rpcCall(10+2*n, `{"command":"view","path":"/memories/d.md"}`))
	var view rpcAnswer
	for view.ID != 10+2*n {
		view = answer(t, next())
	}
	count := map[string]int{}
	for _, line := range strings.Split(view.text(), "\n") {
		if _, text, ok := strings.Cut(line, "\t"); ok && strings.HasPrefix(text, "burst ") {
			count[text]++
		}
	}
	var wrong []string
	for k := range n {
		if c := count[fmt.Sprintf("burst %d", k)]; c != 1 {
			wrong = append(wrong, fmt.Sprintf("%d: %d times", k, c))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("inserts not in the file once: %v", wrong)
	}
	if commits := commitsSince(t, repo, head.Hash); len(commits) != n {
		t.Errorf("%d commits for %d inserts", len(commits), n)
	}
	gittest.Fsck(t, repo.Dir())
}

// mcpPost posts one JSON-RPC message to an MCP HTTP endpoint, in session
// (when not empty), and returns the answer's status, body and session id.
func mcpPost(t *testing.T, url, session, msg string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), res.Header.Get("Mcp-Session-Id")
}

// Over streamable HTTP too, the retry of a call cancelled after its
// change was committed is answered from that commit.
func TestMCPHTTPRetryOfCancelledCallAppliesOnce(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	srv := httptest.NewServer(h.MCPHTTP(handler.HTTPOptions{}, handler.MCPOptions{}))
	defer srv.Close()
	url := srv.URL + handler.MCPPath
	_, _, session := mcpPost(t, url, "", rpcInitialize)
	if session == "" {
		t.Fatal("no session")
	}
	mcpPost(t, url, session, rpcInitialized)
	mcpPost(t, url, session, rpcCall(1, `{"command":"create","path":"/memories/log.md","file_text":"start\n"}`))
	head, _ := repo.Commit(context.Background(), "HEAD")
	insert := `{"command":"insert","path":"/memories/log.md","insert_line":0,"insert_text":"step"}`
	_, body, _ := mcpPost(t, url, session, rpcCall(2, insert))
	first := answer(t, body)
	if status, _, _ := mcpPost(t, url, session, rpcCancel(2)); status != http.StatusAccepted {
		t.Fatalf("the cancel: %d", status)
	}
	_, body, _ = mcpPost(t, url, session, rpcCall(3, insert))
	retry := answer(t, body)
	if retry.text() != "The file /memories/log.md has been edited." || retry.Result.Meta["tool_use_id"] != first.Result.Meta["tool_use_id"] {
		t.Errorf("the retry: %+v, the first: %+v", retry, first)
	}
	if commits := commitsSince(t, repo, head.Hash); len(commits) != 1 {
		t.Errorf("%d commits for one insert and its retry", len(commits))
	}
	gittest.Fsck(t, repo.Dir())
}

// The plain transports keep a connection's order too: stdio answers one
// line after another, and HTTP/1.1 serves the requests of one connection
// one after another, also when the client sends them all at once.
func TestPlainTransportsPipelinedInOrder(t *testing.T) {
	t.Parallel()
	const n = 10
	var blocks []string
	for i := range n {
		blocks = append(blocks,
			string(block(fmt.Sprintf("toolu_c%d", i), fmt.Sprintf(`{"command":"create","path":"/memories/f%d.md","file_text":"one\n"}`, i))),
			string(block(fmt.Sprintf("toolu_i%d", i), fmt.Sprintf(`{"command":"insert","path":"/memories/f%d.md","insert_line":1,"insert_text":"two"}`, i))),
			string(block(fmt.Sprintf("toolu_v%d", i), fmt.Sprintf(`{"command":"view","path":"/memories/f%d.md"}`, i))))
	}
	check := func(t *testing.T, results []handler.Result) {
		t.Helper()
		if len(results) != 3*n {
			t.Fatalf("%d results", len(results))
		}
		for i := range n {
			want := fmt.Sprintf("Here's the content of /memories/f%d.md with line numbers:\n     1\tone\n     2\ttwo\n     3\t", i)
			if r := results[3*i+2]; r.ToolUseID != fmt.Sprintf("toolu_v%d", i) || r.Content != want {
				t.Errorf("view %d: %+v", i, r)
			}
		}
	}
	t.Run("stdio", func(t *testing.T) {
		h, _ := newHandler(t, policy.DefaultLimits)
		var out strings.Builder
		if err := h.ServeStdio(context.Background(), strings.NewReader(strings.Join(blocks, "\n")), &out, handler.Caller{}); err != nil {
			t.Fatal(err)
		}
		var results []handler.Result
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			var r handler.Result
			json.Unmarshal([]byte(line), &r)
			results = append(results, r)
		}
		check(t, results)
	})
	t.Run("http", func(t *testing.T) {
		h, _ := newHandler(t, policy.DefaultLimits)
		srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{}))
		defer srv.Close()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var reqs bytes.Buffer
		for _, b := range blocks {
			fmt.Fprintf(&reqs, "POST /v1/tool_use HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}
		go conn.Write(reqs.Bytes()) // all at once, without reading
		r := bufio.NewReader(conn)
		var results []handler.Result
		for range blocks {
			res, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out handler.Result
			json.NewDecoder(res.Body).Decode(&out)
			res.Body.Close()
			results = append(results, out)
		}
		check(t, results)
	})
}
