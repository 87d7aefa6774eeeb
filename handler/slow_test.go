package handler_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// serveWith starts h on the http.Server gitmem builds from opt; closed
// gives the channel closed once the server closed the connection from a
// client's address.
func serveWith(t *testing.T, opt handler.HTTPOptions, h http.Handler) (srv *httptest.Server, closed func(client net.Addr) <-chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	closes := map[string]chan struct{}{}
	of := func(addr string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if closes[addr] == nil {
			closes[addr] = make(chan struct{})
		}
		return closes[addr]
	}
	srv = httptest.NewUnstartedServer(nil)
	srv.Config = opt.Server(h)
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed { // (after the close)
			close(of(c.RemoteAddr().String()))
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, func(client net.Addr) <-chan struct{} { return of(client.String()) }
}

// trickle writes s to conn one byte at a time, then (forever) more bytes
// of a header that never ends, until a write fails or the server closes
// the connection. It reports whether the server closed it (rather than
// the test giving up after a minute: the server's timeouts in these tests
// are well under a second, so only a server without them gets there).
func trickle(t *testing.T, conn net.Conn, s string) (closed bool, answer string) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn) // until the server closes the connection
		done <- string(b)
	}()
	giveUp := time.After(time.Minute)
	for i := 0; ; i++ {
		c := byte('x')
		if i < len(s) {
			c = s[i]
		}
		select {
		case answer := <-done:
			return true, answer
		case <-giveUp:
			conn.Close()
			return false, <-done
		case <-time.After(10 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{c}); err != nil {
			conn.Close()
			select {
			case answer := <-done:
				return true, answer
			case <-giveUp:
				return false, ""
			}
		}
	}
}

// rawAnswer sends req whole on conn and reads the answer (its status and
// body), once the server has closed the connection when serverClosed is
// not nil. The server answers headers over its bound before it has read
// them all (431), and closes the connection half a second later
// (net/http's wait before a close that resets it): Go's client, still
// writing then (its goroutines waiting for the CPU of a loaded machine),
// failed with "connection reset by peer" and no answer
// (TestSlowAndOversizedClients failed so with -test.cpu 1 -test.parallel
// 16). The answer is read here whatever the write returned, and after
// the close, as late as such a client would: it was sent before the
// connection was reset, and stays readable after.
func rawAnswer(t *testing.T, conn net.Conn, serverClosed <-chan struct{}, req string) (int, string) {
	t.Helper()
	defer conn.Close()
	conn.Write([]byte(req)) // an error (the server closed the connection) is not the test's
	if serverClosed != nil {
		select {
		case <-serverClosed:
		case <-time.After(time.Minute):
			t.Fatal("the server did not close the connection")
		}
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, strings.TrimSpace(string(b))
}

// Slow and oversized clients cannot hold a connection or the memory: a
// client that sends its headers a byte at a time (slowloris), or its body
// a byte at a time, is disconnected; an idle keep-alive connection is
// closed; headers past MaxHeaderBytes get 431; a body past MaxBodyBytes
// (announced or chunked) gets 413 with the documented error. None of them
// changes the memory.
func TestSlowAndOversizedClients(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	head, _ := repo.Commit(context.Background(), "HEAD")
	// Each bound on a server of its own: a stall of a loaded machine (the
	// server's goroutines waiting for the CPU) longer than a short timeout
	// must not cut short a request the test wants answered. (With every
	// bound on one server, 200 ms to read the headers, the 64 KiB of
	// headers were refused with no answer, and a body announced over the
	// limit answered EOF: 2 runs in 13 of the package with -test.cpu 1
	// -test.parallel 16.)
	serve := func(t *testing.T, opt handler.HTTPOptions) (url string, dial func() net.Conn, closed func(net.Addr) <-chan struct{}) {
		srv, closed := serveWith(t, opt, h.HTTP(opt))
		return srv.URL, func() net.Conn {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			return conn
		}, closed
	}
	create := `{"type":"tool_use","id":"toolu_slow","name":"memory","input":{"command":"create","path":"/memories/slow.md","file_text":"x"}}`

	t.Run("headers a byte at a time", func(t *testing.T) {
		_, dial, _ := serve(t, handler.HTTPOptions{ReadHeaderTimeout: 200 * time.Millisecond})
		if closed, _ := trickle(t, dial(), "POST /v1/tool_use HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "); !closed {
			t.Error("a client sending its headers a byte at a time kept its connection")
		}
	})
	t.Run("body a byte at a time", func(t *testing.T) {
		_, dial, _ := serve(t, handler.HTTPOptions{ReadTimeout: 400 * time.Millisecond})
		req := fmt.Sprintf("POST /v1/tool_use HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(create)+100)
		conn := dial()
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		closed, answer := trickle(t, conn, create)
		if !closed {
			t.Error("a client sending its body a byte at a time kept its connection")
		}
		if strings.Contains(answer, " 200 OK") {
			t.Errorf("a body cut short by the read timeout was run:\n%s", answer)
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		_, dial, _ := serve(t, handler.HTTPOptions{IdleTimeout: 200 * time.Millisecond})
		conn := dial()
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/tool_use HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(viewBlock), viewBlock)
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("first request: %v %v", res, err)
		}
		io.Copy(io.Discard, res.Body)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("an idle connection was not closed: %v", err)
		}
	})
	t.Run("huge headers", func(t *testing.T) {
		_, dial, closed := serve(t, handler.HTTPOptions{MaxHeaderBytes: 4096})
		req := fmt.Sprintf("POST /v1/tool_use HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Big: %s\r\nContent-Length: %d\r\n\r\n%s",
			strings.Repeat("a", 64<<10), len(create), create)
		conn := dial()
		if status, _ := rawAnswer(t, conn, closed(conn.LocalAddr()), req); status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB of headers: %d", status)
		}
	})
	big := `{"type":"tool_use","id":"toolu_big","name":"memory","input":{"command":"create","path":"/memories/big.md","file_text":"` + strings.Repeat("x", 2000) + `"}}`
	want := `{"error":"request body is larger than the limit of 1,000 bytes"}`
	t.Run("body over the limit", func(t *testing.T) {
		url, dial, _ := serve(t, handler.HTTPOptions{MaxBodyBytes: 1000})
		if status, _, body := post(t, url+"/v1/tool_use", big); status != 413 || body != want {
			t.Errorf("announced: %d %s", status, body)
		}
		// Chunked: no Content-Length, the body grows past the limit.
		req := fmt.Sprintf("POST /v1/tool_use HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
			len(big), big)
		if status, body := rawAnswer(t, dial(), nil, req); status != 413 || body != want {
			t.Errorf("chunked: %d %s", status, body)
		}
	})
	if now, _ := repo.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
		t.Errorf("a refused request made a commit: %s", now.Subject)
	}
	if files, _ := repo.Files("HEAD"); len(files) != 0 {
		t.Errorf("the memory holds %v", files)
	}
}
