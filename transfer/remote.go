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
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// Remote is a Memory Stores API: where, and the key it takes.
type Remote struct {
	BaseURL    string // "": the SDK's (ANTHROPIC_BASE_URL, else https://api.anthropic.com)
	APIKey     string // sent as Authorization: Bearer, as the SDK sends an API key
	MaxRetries int    // retries of a request that failed for a reason worth retrying (the SDK's rules: 408, 409, 429, 5xx, no connection)
}

func (r Remote) client() anthropic.Client {
	opts := []option.RequestOption{option.WithAPIKey(r.APIKey), option.WithMaxRetries(r.MaxRetries)}
	if r.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(r.BaseURL))
	}
	return anthropic.NewClient(opts...)
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
// context stays itself).
func remoteErr(err error) error {
	var ae *anthropic.Error
	var ue *url.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
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
