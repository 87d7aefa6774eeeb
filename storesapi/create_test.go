package storesapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/policy"
)

// F10: a store create that the server cannot carry out (its stores
// folder gone; a full disk or EACCES alike) is the server's failure, 500
// (api_error), with no host path, final (x-should-retry: false) when a
// retry cannot help (the folder gone, EACCES, a read-only mount); before, 400 invalid_request_error
// "create store x1: mkdir /.../x1: no such file or directory". A file at
// the store's name is in the way: 409, saying so.
func TestStoreCreateTheServerCannotMake(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	if err := os.WriteFile(filepath.Join(a.dir.Root(), "blocker"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var e struct{ Error string }
	if code := a.call("ops", "POST", "/v1/stores", map[string]any{"name": "blocker"}, &e); code != http.StatusConflict ||
		!strings.Contains(e.Error, "a file, not a store, is in its place on the server") {
		t.Errorf("create over a file: %d %q", code, e.Error)
	}
	if err := os.Remove(filepath.Join(a.dir.Root(), "blocker")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a.dir.Root()); err != nil {
		t.Fatal(err)
	}
	if code := a.call("ops", "POST", "/v1/stores", map[string]any{"name": "x1"}, &e); code != http.StatusInternalServerError ||
		e.Error != "the store could not complete the request; nothing was changed" || a.header.Get("x-should-retry") != "false" {
		t.Errorf("create in a stores folder that is gone: %d %q, x-should-retry %q", code, e.Error, a.header.Get("x-should-retry"))
	}
	var me msError
	code := a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "x"}, &me)
	a.refused("memory store create in a stores folder that is gone", code, me, 500, "api_error", "false")
	if strings.Contains(me.Error.Message, a.dir.Root()) {
		t.Errorf("the answer names a host path: %q", me.Error.Message)
	}
}
