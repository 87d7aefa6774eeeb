package storesapi

import (
	"time"

	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/stores"
)

// The objects of the Memory Stores API, field for field as the official
// SDKs type them (BetaManagedAgentsMemoryStore, ...Memory, ...MemoryPrefix,
// ...MemoryVersion, ...Deleted*): every field always present, null where
// there is no value.

func apiTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func apiTimeOrNull(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := apiTime(t)
	return &s
}

type memoryStoreJSON struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	ArchivedAt  *string           `json:"archived_at"`
	CreatedAt   string            `json:"created_at"`
	UpdatedAt   string            `json:"updated_at"`
}

func memoryStoreOf(i stores.Info) memoryStoreJSON {
	j := memoryStoreJSON{ID: i.Name, Type: "memory_store", Name: i.Title(), Description: i.Description, Metadata: i.Metadata,
		ArchivedAt: apiTimeOrNull(i.Archived), CreatedAt: apiTime(i.Created), UpdatedAt: apiTime(i.Updated)}
	if j.Metadata == nil {
		j.Metadata = map[string]string{}
	}
	return j
}

type deletedJSON struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

type memoryJSON struct {
	ID               string  `json:"id"`
	Type             string  `json:"type"`
	MemoryStoreID    string  `json:"memory_store_id"`
	Path             string  `json:"path"`
	Content          *string `json:"content"`
	ContentSHA256    string  `json:"content_sha256"`
	ContentSizeBytes int64   `json:"content_size_bytes"`
	MemoryVersionID  string  `json:"memory_version_id"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
}

func memoryOf(store string, m memstore.Memory, withContent bool) memoryJSON {
	j := memoryJSON{ID: m.ID, Type: "memory", MemoryStoreID: store, Path: m.Path, ContentSHA256: m.SHA256, ContentSizeBytes: m.Size,
		MemoryVersionID: m.VersionID, CreatedAt: apiTime(m.Created), UpdatedAt: apiTime(m.Updated)}
	if withContent {
		s := string(m.Content)
		j.Content = &s
	}
	return j
}

type memoryPrefixJSON struct {
	Type string `json:"type"`
	Path string `json:"path"`
}

type actorJSON struct {
	Type             string `json:"type"`
	APIKeyID         string `json:"api_key_id,omitempty"`
	SessionID        string `json:"session_id,omitempty"`
	UserID           string `json:"user_id,omitempty"`
	ServiceAccountID string `json:"service_account_id,omitempty"`
}

func actorOf(a memstore.Actor) *actorJSON {
	switch a.Type {
	case memstore.APIActor:
		return &actorJSON{Type: a.Type, APIKeyID: a.ID}
	case memstore.SessionActor:
		return &actorJSON{Type: a.Type, SessionID: a.ID}
	case memstore.UserActor:
		return &actorJSON{Type: a.Type, UserID: a.ID}
	case memstore.ServiceAccountActor:
		return &actorJSON{Type: a.Type, ServiceAccountID: a.ID}
	}
	return nil
}

type memoryVersionJSON struct {
	ID               string     `json:"id"`
	Type             string     `json:"type"`
	MemoryID         string     `json:"memory_id"`
	MemoryStoreID    string     `json:"memory_store_id"`
	Operation        string     `json:"operation"`
	CreatedAt        string     `json:"created_at"`
	Content          *string    `json:"content"`
	ContentSHA256    *string    `json:"content_sha256"`
	ContentSizeBytes *int64     `json:"content_size_bytes"`
	Path             *string    `json:"path"`
	CreatedBy        *actorJSON `json:"created_by"`
	RedactedAt       *string    `json:"redacted_at"`
	RedactedBy       *actorJSON `json:"redacted_by"`
}

func memoryVersionOf(store string, v memstore.Version, withContent bool) memoryVersionJSON {
	j := memoryVersionJSON{ID: v.ID, Type: "memory_version", MemoryID: v.MemoryID, MemoryStoreID: store, Operation: v.Operation,
		CreatedAt: apiTime(v.Created), CreatedBy: actorOf(v.By), RedactedAt: apiTimeOrNull(v.RedactedAt), RedactedBy: actorOf(v.RedactedBy)}
	if v.Path != "" {
		j.Path = &v.Path
	}
	if v.SHA256 != "" {
		j.ContentSHA256, j.ContentSizeBytes = &v.SHA256, &v.Size
		if withContent {
			s := string(v.Content)
			j.Content = &s
		}
	}
	return j
}
