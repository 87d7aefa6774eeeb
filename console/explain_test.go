package console

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/gitmem-dev/gitmem/stores"
)

// A store opened while the server had no file descriptor to spare (the
// error stores.Dir.Acquire gives: TestStoreOpenedOutOfFilesIsRetried) is
// a 503 on the console's pages, saying so, as the APIs do. Before, the
// 500 "The store could not complete the request; nothing was changed."
func TestExplainOutOfFiles(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("store s: %w (%w)", stores.ErrOutOfFiles, syscall.EMFILE)
	status, msg := explain("s", err)
	if want := "Store s could not be opened: the server has too many files open; nothing was changed; retry after 1 s."; status != http.StatusServiceUnavailable || msg != want {
		t.Errorf("%d %q, want 503 %q", status, msg, want)
	}
}
