package operator

import (
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// The JSON shapes below are shared by `gitmem ... --json` and the HTTP
// operator API (docs/openapi.yaml), so both print a change or a memory the
// same way.

// JSONTime is the time format of every JSON shape (RFC 3339; a store's
// times in stores.StoreJSON too).
func JSONTime(t time.Time) string { return t.Format(time.RFC3339) }

// CommitJSON is a commit of a memory's history (a version).
type CommitJSON struct {
	Hash      string            `json:"hash"`
	Parents   []string          `json:"parents"`
	Time      string            `json:"time"`
	Author    map[string]string `json:"author"`
	Subject   string            `json:"subject"`
	ToolUseID string            `json:"tool_use_id,omitempty"`
	Command   string            `json:"command,omitempty"`
	Path      string            `json:"path,omitempty"`
	NewPath   string            `json:"new_path,omitempty"`
	Session   string            `json:"session,omitempty"`
	Agent     string            `json:"agent,omitempty"`
	Trailers  [][2]string       `json:"trailers,omitempty"`
	Paths     []string          `json:"paths,omitempty"`
	Diff      string            `json:"diff,omitempty"`
}

// ToCommitJSON is a commit as CommitJSON (without its diff).
func ToCommitJSON(c gitmem.Commit) CommitJSON {
	j := CommitJSON{Hash: c.Hash, Parents: c.Parents, Time: JSONTime(c.Time),
		Author: map[string]string{"name": c.Author.Name, "email": c.Author.Email}, Subject: c.Subject,
		ToolUseID: c.Trailer(gitmem.TrailerToolUseID), Command: c.Trailer(gitmem.TrailerCommand),
		Path: c.Trailer(gitmem.TrailerPath), NewPath: c.Trailer(gitmem.TrailerNewPath),
		Session: c.Trailer(gitmem.TrailerSession), Agent: c.Trailer(gitmem.TrailerAgent)}
	for _, t := range c.Trailers {
		j.Trailers = append(j.Trailers, [2]string{t.Key, t.Value})
	}
	for _, p := range c.Paths {
		j.Paths = append(j.Paths, "/memories/"+p)
	}
	if j.Parents == nil {
		j.Parents = []string{}
	}
	return j
}

// MemoryJSON is a memory file: its content (when asked for) and what last
// changed it.
type MemoryJSON struct {
	Path             string  `json:"path"`
	ContentSizeBytes int64   `json:"content_size_bytes"`
	ContentSHA256    string  `json:"content_sha256"`
	Content          *string `json:"content,omitempty"`
	UpdatedAt        string  `json:"updated_at"`
	Version          string  `json:"version"` // the commit that last changed it
	Command          string  `json:"command,omitempty"`
	ToolUseID        string  `json:"tool_use_id,omitempty"`
	Agent            string  `json:"agent,omitempty"`
	Session          string  `json:"session,omitempty"`
	Author           string  `json:"author"`
}

// JSON is the memory as MemoryJSON, with its content when withContent.
func (m Memory) JSON(withContent bool) MemoryJSON {
	j := MemoryJSON{Path: policy.Display(m.Path), ContentSizeBytes: m.Size, ContentSHA256: m.SHA256,
		UpdatedAt: JSONTime(m.Last.Time), Version: m.Last.Hash, Command: m.Last.Trailer(gitmem.TrailerCommand),
		ToolUseID: m.Last.Trailer(gitmem.TrailerToolUseID), Agent: m.Last.Trailer(gitmem.TrailerAgent),
		Session: m.Last.Trailer(gitmem.TrailerSession), Author: m.Last.Author.Name}
	if withContent {
		s := string(m.Content)
		j.Content = &s
	}
	return j
}
