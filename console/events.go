package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/stores"
)

// The live timeline: a stream of server-sent events that says "head"
// (with the new commit) whenever the memory's branch moves; the page's
// script then fetches the timeline again and adds what is new.
const (
	maxStreams  = 64               // streams open at once; more get 503 (the page still works, without live updates)
	streamFor   = 5 * time.Minute  // a stream ends after this; the browser opens another (and is authenticated again)
	streamPoll  = time.Second      // how often a stream looks at the branch
	streamPing  = 15 * time.Second // a comment keeps proxies from closing an idle stream
	streamRetry = 2000             // milliseconds the browser waits before it reconnects
)

// events is the stream of one memory's head. It does not hold the store
// (a stream lasts minutes, and a store in use cannot be archived or
// deleted): it uses it for a moment at each look.
func (c *Console) events(w http.ResponseWriter, r *http.Request, v *visit) {
	name := r.PathValue("store")
	switch {
	case (name == "") != (c.opt.Stores == nil):
		http.NotFound(w, r)
		return
	case !v.token.Allows(name):
		http.Error(w, "token "+v.token.Name+" may not use store "+name, http.StatusForbidden)
		return
	}
	head := c.headOf(name)
	if head() == "" {
		http.NotFound(w, r)
		return
	}
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		http.Error(w, "too many live timelines are open", http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(streamFor + time.Minute)) // beyond the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", streamRetry)
	rc.Flush()
	seen := r.FormValue("head")
	end := time.NewTimer(streamFor)
	defer end.Stop()
	poll := time.NewTicker(streamPoll)
	defer poll.Stop()
	last := time.Now()
	for {
		if h := head(); h != "" && h != seen {
			seen = h
			fmt.Fprintf(w, "event: head\ndata: %s\n\n", h)
			if rc.Flush() != nil {
				return
			}
			last = time.Now()
		} else if time.Since(last) > streamPing {
			fmt.Fprint(w, ": ping\n\n")
			if rc.Flush() != nil {
				return
			}
			last = time.Now()
		}
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-poll.C:
		}
	}
}

// headOf reads the head of the memory the stream is about.
func (c *Console) headOf(store string) func() string {
	snapHead := func(r *gitmem.Repo) string {
		snap, err := r.Snapshot(context.Background())
		if err != nil {
			return ""
		}
		return snap.Head()
	}
	if store == "" {
		return func() string { return snapHead(c.opt.Repo) }
	}
	return func() string {
		st, err := c.opt.Stores.Acquire(context.Background(), store)
		if err != nil {
			return ""
		}
		defer st.Release()
		h := ""
		st.Use(func(r *gitmem.Repo, _ stores.Meta) error { h = snapHead(r); return nil })
		return h
	}
}
