// Package transfer copies memory stores between a Memory Stores API
// (Anthropic's hosted service, or another gitmem server: the same calls)
// and a folder of gitmem stores, with the official Go SDK
// (anthropic-sdk-go/v2) as the client. Import makes a gitmem store of a
// store there, every version a commit with its ids, time and actor;
// Export copies a gitmem store's current memories to a store there. It
// is the only package besides memorytool that imports the SDK; the
// server does not (docs/memory-stores.md, "Moving stores").
package transfer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/gitmem-dev/gitmem/policy"
)

// Remote is a Memory Stores API: where, and the key it takes.
type Remote struct {
	BaseURL    string // "": the SDK's (ANTHROPIC_BASE_URL, else https://api.anthropic.com)
	APIKey     string // sent as Authorization: Bearer, as the SDK sends an API key
	MaxRetries int    // retries of a request that failed for a reason worth retrying (the SDK's rules: 408, 409, 429, 5xx, no connection)
	// Timeout bounds one attempt of a request, its answer read whole (0:
	// two minutes): a source that stops answering mid-way (a proxy, a
	// peer gone without a reset) would hold an unattended import or
	// export for ever. An attempt that times out is retried as a failed
	// connection is.
	Timeout time.Duration
	// MaxListed bounds the items of one listing (the versions or the
	// memories of a store, every page), repeats included: past it the
	// listing is refused, an *ImportError, as a listing without end. 0:
	// a hundred versions for each of the most memories a gitmem store
	// holds by default (policy.DefaultLimits.MaxFiles; the hosted
	// service holds 2,000), a million. An import holds every item
	// listed until it is written.
	MaxListed int
}

func (r Remote) maxListed() int { return cmp.Or(r.MaxListed, 100*policy.DefaultLimits.MaxFiles) }

func (r Remote) client() anthropic.Client {
	opts := []option.RequestOption{option.WithAPIKey(r.APIKey), option.WithMaxRetries(r.MaxRetries), option.WithMiddleware(capAnswer),
		option.WithRequestTimeout(cmp.Or(r.Timeout, 2*time.Minute))}
	if r.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(r.BaseURL))
	}
	return anthropic.NewClient(opts...)
}

// maxAnswerBytes bounds the answer to one request: more than any of the
// API's holds (the largest, a page of 20 versions with content of at
// most 102,400 bytes each, escaped in JSON, is under 13 MiB).
const maxAnswerBytes = 16 << 20

// capAnswer has the body of an answer read up to maxAnswerBytes: past
// that, reading it fails with an *ImportError (a source broken or
// hostile; the SDK reads a body whole), and the request is not made
// again.
func capAnswer(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res.Body != nil {
		res.Body = &cappedBody{ReadCloser: res.Body, left: maxAnswerBytes, req: req, res: res}
	}
	return res, err
}

type cappedBody struct {
	io.ReadCloser
	left int64 // what may still be read; below 0: too much was
	req  *http.Request
	res  *http.Response
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooBig()
	}
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left+1)])
	if b.left -= int64(n); b.left < 0 {
		return 0, b.tooBig()
	}
	return n, err
}

func (b *cappedBody) tooBig() error {
	// The SDK retries an answer whose body it could not read, unless the
	// answer says not to.
	b.res.Header.Set("x-should-retry", "false")
	return importErr("%s %s: the answer is over %s bytes, more than any answer of a Memory Stores API holds",
		b.req.Method, redactURL(b.req.URL), policy.Thousands(maxAnswerBytes))
}

// RemoteError is a request to the Memory Stores API that failed: refused
// (Status, and the API's error Type and Message) or not answered (Status
// 0, Err).
type RemoteError struct {
	Method, URL string
	Status      int
	Type        string // the API's error type ("not_found_error"); "" when the answer was not the API's
	Message     string
	RequestID   string
	Err         error
}

func (e *RemoteError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err)
	}
	msg := fmt.Sprintf("%s %s: %d", e.Method, e.URL, e.Status)
	if e.Type != "" {
		msg += " " + e.Type
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return msg
}

func (e *RemoteError) Unwrap() error { return e.Err }

// remoteErr is what the SDK returned as a *RemoteError (a cancelled
// context stays itself, and an answer too big capAnswer's *ImportError).
var errNoAnswer = errors.New("no whole answer within the request timeout")

func remoteErr(err error) error {
	var ae *anthropic.Error
	var ue *url.Error
	var ie *ImportError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded): // an attempt's timeout (Remote.Timeout)
		return &RemoteError{Err: errNoAnswer}
	case errors.As(err, &ie): // an answer too big (capAnswer)
		return ie
	case errors.As(err, &ae):
		re := &RemoteError{Status: ae.StatusCode, Type: string(ae.Type()), Message: ae.Message, RequestID: ae.RequestID}
		if ae.Request != nil {
			re.Method, re.URL = ae.Request.Method, redactURL(ae.Request.URL)
		}
		return re
	case errors.As(err, &ue):
		u, _ := url.Parse(ue.URL)
		return &RemoteError{Method: strings.ToUpper(ue.Op), URL: redactURL(u), Err: ue.Err}
	}
	return &RemoteError{Err: err}
}

// redactURL is u without its query (a page cursor says nothing useful)
// or user information.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.RawQuery, c.ForceQuery = nil, "", false
	return c.String()
}
