package handler

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A request that finds room at once makes no context to wait for room
// in (a timer each; 2% of the many-stores row's CPU, issue 25): only one
// that queues does, and it still gets 503 after QueueWait. Its calls'
// deadline is the write timeout's, as before.
func TestLimiterQueuesOnlyWithoutRoom(t *testing.T) {
	t.Parallel()
	o := HTTPOptions{MaxInflight: 1, QueueWait: 20 * time.Millisecond}
	o.defaults()
	l := newLimiter(o)
	var deadline time.Time
	h := l.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, _ = r.Context().Deadline()
	}))
	serve := func() int {
		req := httptest.NewRequest("POST", "/v1/tool_use", strings.NewReader("{}"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	before := time.Now()
	if code := serve(); code != http.StatusOK {
		t.Fatalf("with room: %d", code)
	}
	if n := l.waits.Load(); n != 0 {
		t.Errorf("a request with room made %d waits for it, want none", n)
	}
	if want := before.Add(o.WriteTimeout - answerMargin); deadline.Before(want) || deadline.After(time.Now().Add(o.WriteTimeout-answerMargin)) {
		t.Errorf("the calls' deadline is %v, want %v or just after", deadline, want)
	}
	if !l.reqs.TryAcquire(1) { // the server full
		t.Fatal("no room")
	}
	if code := serve(); code != http.StatusServiceUnavailable {
		t.Errorf("without room: %d, want 503", code)
	}
	if n := l.waits.Load(); n != 1 {
		t.Errorf("a request without room made %d waits for it, want 1", n)
	}
	l.reqs.Release(1)
}
