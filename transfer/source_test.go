package transfer_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/transfer"
)

// hostedStore is the id of the store a scripted source serves.
const hostedStore = "memstore_011CZkZaBF1tNoB5wlCeusgy"

// storeJSON is the hosted store as the API gives it, created and updated
// at created (RFC 3339).
func storeJSON(created string) string {
	return `{"id":"` + hostedStore + `","type":"memory_store","name":"Support bot","description":"","metadata":{},` +
		`"archived_at":null,"created_at":"` + created + `","updated_at":"` + created + `"}`
}

// versionJSON is a version of the hosted store with its content (view
// full), its content_sha256 and content_size_bytes those of content.
func versionJSON(id, mem, op, at, path, content, actor string) string {
	return `{"id":` + strconv.Quote(id) + `,"type":"memory_version","memory_id":"` + mem + `","memory_store_id":"` + hostedStore + `","operation":"` + op +
		`","created_at":"` + at + `","path":"` + path + `","content":` + strconv.Quote(content) + `,"content_sha256":"` + memstore.SHA256([]byte(content)) +
		`","content_size_bytes":` + strconv.Itoa(len(content)) + `,"created_by":` + actor + `,"redacted_at":null,"redacted_by":null}`
}

// memoryJSON is a memory of the hosted store (view basic), its
// content_sha256 and content_size_bytes those of content, created and
// updated at at.
func memoryJSON(id, path, content, version, at string) string {
	return `{"id":"` + id + `","type":"memory","memory_store_id":"` + hostedStore + `","path":"` + path + `","content":null,"content_sha256":"` +
		memstore.SHA256([]byte(content)) + `","content_size_bytes":` + strconv.Itoa(len(content)) + `,"memory_version_id":` + strconv.Quote(version) +
		`,"created_at":"` + at + `","updated_at":"` + at + `"}`
}

// pageJSON is a page of a listing: items, and next ("": none).
func pageJSON(next string, items ...string) string {
	n := "null"
	if next != "" {
		n = strconv.Quote(next)
	}
	return `{"data":[` + strings.Join(items, ",") + `],"next_page":` + n + `}`
}

// source is a scripted Memory Stores API serving hostedStore: answer
// gives the body of each GET by path (from /v1/memory_stores/ID on: "",
// "/memory_versions", "/memories") and page cursor ("" for a 404). It
// counts the requests to each path and the bytes it wrote.
type source struct {
	url      string
	requests map[string]*atomic.Int64
	written  atomic.Int64
}

func newSource(t *testing.T, answer func(path, page string) string) *source {
	t.Helper()
	s := &source{requests: map[string]*atomic.Int64{}}
	for _, p := range []string{"", "/memory_versions", "/memories"} {
		s.requests[p] = new(atomic.Int64)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := strings.CutPrefix(r.URL.Path, "/v1/memory_stores/"+hostedStore)
		body := ""
		if n := s.requests[path]; ok && n != nil && r.Method == "GET" {
			n.Add(1)
			body = answer(path, r.URL.Query().Get("page"))
		}
		w.Header().Set("Content-Type", "application/json")
		if body == "" {
			w.WriteHeader(404)
			body = `{"type":"error","error":{"type":"not_found_error","message":"not found"}}`
		}
		for len(body) > 0 { // in pieces, counted as they are taken
			n, err := io.WriteString(w, body[:min(len(body), 64<<10)])
			s.written.Add(int64(n))
			if err != nil {
				return
			}
			body = body[n:]
		}
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// importFrom imports the hosted store from s into a new stores folder,
// and checks that a failed import leaves nothing there.
func importFrom(t *testing.T, s *source) (transfer.ImportResult, error) {
	t.Helper()
	return importListing(t, s, 0)
}

// importListing is importFrom with Remote.MaxListed maxListed.
func importListing(t *testing.T, s *source, maxListed int) (transfer.ImportResult, error) {
	t.Helper()
	root := gittest.TempDir(t)
	res, err := transfer.Import(ctx, transfer.Remote{BaseURL: s.url, APIKey: "sk-ant-test", MaxRetries: 2, MaxListed: maxListed}, root, hostedStore,
		transfer.ImportOptions{Name: "support"})
	if entries, _ := os.ReadDir(root); err != nil && len(entries) != 0 {
		t.Errorf("a failed import left %v", entries)
	}
	return res, err
}

const apiActor = `{"type":"api_actor","api_key_id":"apikey_01Ab"}`

// A source whose listing gives the same next_page again (broken, or
// hostile: a proxy that answers every page with the first) stops the
// import there, with a clear error, nothing imported. Before, the import
// followed it for ever, keeping every page: ~680 requests a second and
// the importer's memory growing until it was killed.
func TestImportStopsAtARepeatedPageCursor(t *testing.T) {
	t.Parallel()
	for _, listing := range []string{"/memory_versions", "/memories"} {
		t.Run(listing[1:], func(t *testing.T) {
			t.Parallel()
			v := versionJSON("memver_1", "mem_a", "created", "2026-04-01T10:00:00Z", "/a.md", "a\n", apiActor)
			m := memoryJSON("mem_a", "/a.md", "a\n", "memver_1", "2026-04-01T10:00:00Z")
			var s *source
			s = newSource(t, func(path, page string) string {
				item := map[string]string{"/memory_versions": v, "/memories": m}[path]
				switch {
				case path == "":
					return storeJSON("2026-04-01T10:00:00Z")
				case path != listing:
					return pageJSON("", item)
				case s.requests[path].Load() > 100: // an end, for an import that does not stop
					return pageJSON("")
				case page == "2":
					return pageJSON("1", item) // round: page 1 again
				}
				return pageJSON(strconv.Itoa(len(page)+1), item)
			})
			_, err := importFrom(t, s)
			var ie *transfer.ImportError
			want := "the API lists the " + map[string]string{"/memory_versions": "versions", "/memories": "memories"}[listing] +
				` of store ` + hostedStore + ` without end: it gives the next_page "1" a second time`
			if !errors.As(err, &ie) || err.Error() != want {
				t.Errorf("%v\nwant %s", err, want)
			}
			if n := s.requests[listing].Load(); n != 3 {
				t.Errorf("%d requests of the listing, want 3", n)
			}
		})
	}
}

// A source whose listing gives a new next_page for ever stops the import
// with a clear error naming the bound, nothing imported, after a bounded
// number of requests (so a bounded memory): pages that bring nothing new
// (empty, or only items listed before) ten in a row, or more items than
// Remote.MaxListed in all. Before, the import followed it for ever (2 GB
// of memory in 30 s, nothing written). An empty page with a next_page,
// as the hosted service may send, is taken: a few in a row still import.
func TestImportStopsAtAListingWithoutEnd(t *testing.T) {
	t.Parallel()
	item := func(path string, i int) string {
		id := "memver_" + strconv.Itoa(i)
		if path == "/memories" {
			return memoryJSON("mem_"+strconv.Itoa(i), "/m"+strconv.Itoa(i)+".md", "a\n", id, "2026-04-01T10:00:00Z")
		}
		return versionJSON(id, "mem_"+strconv.Itoa(i), "created", "2026-04-01T10:00:00Z", "/m"+strconv.Itoa(i)+".md", "a\n", apiActor)
	}
	const bound = 50
	for _, c := range []struct {
		name     string
		page     func(path string, n int) string // the listing's n-th page (from 1), of a next_page n+1
		requests int64                           // of the listing
		err      string                          // after "the API lists the {what} of store ID "
	}{
		{"empty", func(string, int) string { return pageJSON("x") }, 10,
			"without end: 10 pages in a row give nothing new, each with a next_page"},
		{"repeated", func(path string, n int) string { return pageJSON("x", item(path, 1)) }, 11,
			"without end: 10 pages in a row give nothing new, each with a next_page"},
		{"new", func(path string, n int) string { return pageJSON("x", item(path, n)) }, bound + 1,
			"without end: more than 50 items (the bound of one listing)"},
		{"a few empty", func(path string, n int) string {
			if n == 4 {
				return pageJSON("", item(path, 1))
			}
			return pageJSON("x")
		}, 4, ""},
	} {
		for _, listing := range []string{"/memory_versions", "/memories"} {
			t.Run(c.name+listing, func(t *testing.T) {
				t.Parallel()
				var s *source
				s = newSource(t, func(path, page string) string {
					n := int(s.requests[path].Load())
					switch {
					case path == "":
						return storeJSON("2026-04-01T10:00:00Z")
					case path != listing:
						return pageJSON("", item(path, 1))
					case n > 5000: // an end, for an import that does not stop
						return pageJSON("")
					}
					body := c.page(path, n)
					return strings.Replace(body, `"next_page":"x"`, `"next_page":"`+strconv.Itoa(n+1)+`"`, 1)
				})
				_, err := importListing(t, s, bound)
				what := map[string]string{"/memory_versions": "versions", "/memories": "memories"}[listing]
				var ie *transfer.ImportError
				if c.err == "" {
					if err != nil {
						t.Errorf("import: %v", err)
					}
				} else if want := "the API lists the " + what + " of store " + hostedStore + " " + c.err; !errors.As(err, &ie) || err.Error() != want {
					t.Errorf("%v\nwant %s", err, want)
				}
				if n := s.requests[listing].Load(); n != c.requests {
					t.Errorf("%d requests of the listing, want %d", n, c.requests)
				}
			})
		}
	}
}

// What a source gives that a gitmem store cannot hold as it is is
// refused before anything is written, saying what and why, with an id
// of a control character quoted (no line break on the operator's
// terminal), never "did the store change while it was read? run the
// import again" (it would fail the same). Before: a time past 2262 was
// "the time of memver_1 is 1715-06-13 00:25:26 +0000 +0000 here, ...
// (did the store change ...? run the import again)" (nanoseconds past
// int64), one before 1970 was imported at 1970-01-01 as a success, an
// api_key_id with a newline was "the copy differs ... run the import
// again", an id with a newline was printed raw, and a content over the
// limit was refused only as it was written.
func TestImportRefusesWhatAStoreCannotHold(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, store, version, want string
	}{
		{"past 2262", "", versionJSON("memver_1", "mem_a", "created", "2300-01-01T00:00:00Z", "/a.md", "a\n", apiActor),
			"version memver_1: its created_at 2300-01-01T00:00:00Z is out of the times a git commit holds here (1970 to 2262)"},
		{"end of time", "", versionJSON("memver_1", "mem_a", "created", "9999-12-31T23:59:59Z", "/a.md", "a\n", apiActor),
			"version memver_1: its created_at 9999-12-31T23:59:59Z is out of the times a git commit holds here (1970 to 2262)"},
		{"before 1970", "", versionJSON("memver_1", "mem_a", "created", "1901-01-01T00:00:00Z", "/a.md", "a\n", apiActor),
			"version memver_1: its created_at 1901-01-01T00:00:00Z is out of the times a git commit holds here (1970 to 2262)"},
		{"store before 1970", "1969-12-31T23:59:59Z", versionJSON("memver_1", "mem_a", "created", "2026-04-01T10:00:00Z", "/a.md", "a\n", apiActor),
			"the store's created_at 1969-12-31T23:59:59Z is out of the times a git commit holds here (1970 to 2262)"},
		{"year one", "", versionJSON("memver_1", "mem_a", "created", "0001-01-01T00:00:00Z", "/a.md", "a\n", apiActor),
			"version memver_1: its created_at is missing or not a time"}, // the zero time: it was blamed on a store that changed
		{"api key id", "", versionJSON("memver_1", "mem_a", "created", "2026-04-01T10:00:00Z", "/a.md", "a\n", `{"type":"api_actor","api_key_id":"key\nX: y"}`),
			`version memver_1: its created_by id "key\nX: y" cannot stand in a commit's trailer as it is (a control character, white space at an end or in a run, or over 256 bytes)`},
		{"version id", "", versionJSON("memver_1\nTool-Use-Id: toolu_evil", "mem_a", "created", "2026-04-01T10:00:00Z", "/a.md", "a\n", apiActor),
			`version "memver_1\nTool-Use-Id: toolu_evil" of memory mem_a cannot follow the versions before it: ` +
				`version "memver_1\nTool-Use-Id: toolu_evil" of memory "mem_a": not ids this store can keep`},
		{"content", "", versionJSON("memver_1", "mem_a", "created", "2026-04-01T10:00:00Z", "/a.md", strings.Repeat("a", memstore.MaxContentBytes+1), apiActor),
			"version memver_1: its content is 102,401 bytes, over the 102,400 a memory holds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			created := c.store
			if created == "" {
				created = "2026-04-01T10:00:00Z"
			}
			var v struct {
				ID, Path, Content string
				At                string `json:"created_at"`
			}
			if err := json.Unmarshal([]byte(c.version), &v); err != nil {
				t.Fatal(err)
			}
			m := memoryJSON("mem_a", v.Path, v.Content, v.ID, v.At) // as the version made it
			s := newSource(t, func(path, page string) string {
				return map[string]string{"": storeJSON(created), "/memory_versions": pageJSON("", c.version), "/memories": pageJSON("", m)}[path]
			})
			_, err := importFrom(t, s)
			var ie *transfer.ImportError
			if !errors.As(err, &ie) || err.Error() != c.want {
				t.Errorf("%v\nwant %s", err, c.want)
			}
		})
	}
}

// An answer bigger than any the API gives (a page of 20 versions of at
// most 102,400 bytes) is refused as it is read, and not asked again:
// not read whole. Before, a 300 MB content was read whole (the
// importer's memory 1.5 GB) and then refused for its content_sha256.
func TestImportReadsABoundedAnswer(t *testing.T) {
	t.Parallel()
	const huge = 64 << 20
	// The answers made once, not at each request (each of the 64 MiB
	// content made, hashed and quoted again: most of the test's CPU).
	content := strings.Repeat("a", huge)
	answers := map[string]string{"": storeJSON("2026-04-01T10:00:00Z"),
		"/memory_versions": pageJSON("", versionJSON("memver_1", "mem_a", "created", "2026-04-01T10:00:00Z", "/a.md", content, apiActor)),
		"/memories":        pageJSON("", memoryJSON("mem_a", "/a.md", content, "memver_1", "2026-04-01T10:00:00Z"))}
	s := newSource(t, func(path, page string) string { return answers[path] })
	_, err := importFrom(t, s)
	var ie *transfer.ImportError
	want := "GET " + s.url + "/v1/memory_stores/" + hostedStore + "/memory_versions: the answer is over 16,777,216 bytes, more than any answer of a Memory Stores API holds"
	if !errors.As(err, &ie) || err.Error() != want {
		t.Errorf("%v\nwant %s", err, want)
	}
	if n := s.requests["/memory_versions"].Load(); n != 1 {
		t.Errorf("asked %d times", n)
	}
	// What the socket's buffers took beyond what was read is not counted
	// out: well under the whole.
	if w := s.written.Load(); w > huge/2 {
		t.Errorf("the source wrote %d of %d bytes", w, huge)
	}
}

// A source that stops answering mid-way: each attempt ends at the
// request timeout, and the import fails, nothing imported. It waited for
// ever (no timeout was set on the SDK's requests: N7 G5).
func TestImportGivesUpOnAStalledAnswer(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		io.WriteString(w, `{"id":`)
		w.(http.Flusher).Flush()
		select { // then nothing, until the client gives up or the test ends
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	root := gittest.TempDir(t)
	done := make(chan error, 1)
	go func() {
		_, err := transfer.Import(ctx, transfer.Remote{BaseURL: srv.URL, APIKey: "sk-ant-test", Timeout: 200 * time.Millisecond}, root, hostedStore,
			transfer.ImportOptions{Name: "support"})
		done <- err
	}()
	select {
	case err := <-done:
		var re *transfer.RemoteError
		if !errors.As(err, &re) {
			t.Errorf("a stalled answer: %v, want a RemoteError", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the import still waits for a stalled answer")
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("a failed import left %v", entries)
	}
}
