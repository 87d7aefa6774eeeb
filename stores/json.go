package stores

import (
	"errors"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// The JSON shapes below are shared by `gitmem store ... --json` and the
// HTTP operator API (docs/openapi.yaml), so both print a store the same
// way (a change or a memory: package operator). Field names follow Anthropic's memory store API where the
// concept is the same (description, metadata, created_at, archived_at).

// StoreJSON is a store.
type StoreJSON struct {
	Name            string            `json:"name"`
	DisplayName     string            `json:"display_name,omitempty"`
	Description     string            `json:"description"`
	Metadata        map[string]string `json:"metadata"`
	SecretScreening string            `json:"secret_screening,omitempty"`
	CreatedAt       string            `json:"created_at"`
	UpdatedAt       string            `json:"updated_at"`
	ArchivedAt      *string           `json:"archived_at"`
}

// UnreadableStoreJSON is a store a list could not read (Info.Err): its
// name, and what is wrong as Unopened (or OutOfFiles) words it (the cause,
// which may name host files, is not given).
type UnreadableStoreJSON struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// ListJSON is a store as a list shows it: StoreJSON, or
// UnreadableStoreJSON when it could not be read.
func (i Info) ListJSON() any {
	if i.Err != nil {
		_, msg := Problem(i.Name, i.Err)
		return UnreadableStoreJSON{Name: i.Name, Error: msg}
	}
	return i.JSON()
}

// Problem is what a list says of the store name that could not be read
// (err): the kind in a word or two (damaged, cannot be opened, busy,
// unreadable) and the sentence Unopened or OutOfFiles words, with what
// to run; no host path.
func Problem(name string, err error) (kind, msg string) {
	if msg, ok := OutOfFiles(name, err); ok {
		return "busy", msg
	}
	if msg, ok := Unopened(name, err); ok {
		if errors.As(err, new(*gitmem.DamagedError)) {
			return "damaged", msg
		}
		return "cannot be opened", msg
	}
	return "unreadable", "the store cannot be read; gitmem fsck on its folder says why"
}

// jsonTime is the time format of every JSON shape: RFC 3339, as
// operator.JSONTime (stores does not depend on operator).
func jsonTime(t time.Time) string { return t.Format(time.RFC3339) }

// JSON is the store as StoreJSON.
func (i Info) JSON() StoreJSON {
	j := StoreJSON{Name: i.Name, DisplayName: i.DisplayName, Description: i.Description, Metadata: i.Metadata, SecretScreening: string(i.Screening),
		CreatedAt: jsonTime(i.Created), UpdatedAt: jsonTime(i.Updated)}
	if j.Metadata == nil {
		j.Metadata = map[string]string{}
	}
	if i.IsArchived() {
		at := jsonTime(i.Archived)
		j.ArchivedAt = &at
	}
	return j
}
