package gitmem

import (
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// Trailer keys gitmem writes. TrailerToolUseID is also the idempotency key:
// a change whose Tool-Use-Id already has a commit is not applied again.
const (
	TrailerToolUseID = "Tool-Use-Id"
	TrailerCommand   = "Memory-Command"
	TrailerPath      = "Memory-Path"
	TrailerNewPath   = "Memory-New-Path"
	TrailerLine      = "Memory-Line"
	TrailerSession   = "Session"
	TrailerAgent     = "Agent"
)

// Signature names a person or program in a commit.
type Signature struct {
	Name  string
	Email string
}

// SignatureOf is the identity of a name gitmem knows no email for (an
// agent, a token): Name <name@gitmem.invalid>, made safe for a commit
// (policy.AgentIdent).
func SignatureOf(name string) Signature {
	n, e := policy.AgentIdent(name)
	return Signature{Name: n, Email: e}
}

// Trailer is one "Key: value" line at the end of a commit message.
type Trailer struct {
	Key   string
	Value string
}

// Meta describes the commit a change becomes.
type Meta struct {
	Subject  string
	Trailers []Trailer
	Author   Signature // zero: the repository's default author
}

// ID is the Tool-Use-Id trailer's value, or "".
func (m Meta) ID() string { return trailerValue(m.Trailers, TrailerToolUseID) }

// Trailer returns the first value of a trailer key, or "".
func (m Meta) Trailer(key string) string { return trailerValue(m.Trailers, key) }

// Commit is a commit of the memory's history.
type Commit struct {
	Hash      string
	Parents   []string
	Author    Signature
	Committer Signature
	Time      time.Time // author time
	Subject   string
	Body      string // the message after the subject, trailers included
	Trailers  []Trailer
	Paths     []string // memory files the commit changed, relative to memories/ (from the history index)
	Blobs     []string // the blob each of Paths holds after the commit, "" where it was deleted (from the history index)
}

// Trailer returns the first value of a trailer key, or "".
func (c Commit) Trailer(key string) string { return trailerValue(c.Trailers, key) }

func trailerValue(ts []Trailer, key string) string {
	for _, t := range ts {
		if strings.EqualFold(t.Key, key) {
			return t.Value
		}
	}
	return ""
}

// message renders a commit message: the subject, a blank line, then the
// trailers, one per line. Newlines inside values are folded to spaces so a
// value can never forge another trailer.
func (m Meta) message() string {
	var b strings.Builder
	b.WriteString(oneLine(m.Subject))
	b.WriteString("\n")
	if len(m.Trailers) > 0 {
		b.WriteString("\n")
		for _, t := range m.Trailers {
			if t.Value == "" {
				continue
			}
			b.WriteString(oneLine(t.Key) + ": " + oneLine(t.Value) + "\n")
		}
	}
	return b.String()
}

// oneLine folds a value onto one line: newlines and the other control
// characters but tab (NUL would make git fsck reject the commit) become
// spaces.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }), " ")
}

// safe is the signature as a commit's author or committer line can hold
// it: '<' and '>' delimit the email and a newline or NUL ends the header,
// so they are dropped or folded. This is the last line of defence; callers
// bound and clean what they pass (policy.CommitIdent).
func (s Signature) safe() Signature {
	clean := func(v string) string {
		return strings.TrimSpace(oneLine(angles.Replace(v)))
	}
	return Signature{Name: clean(s.Name), Email: clean(s.Email)}
}

// angles drops '<' and '>' (built once: a Replacer is costly to make, and
// every commit cleans two signatures).
var angles = strings.NewReplacer("<", "", ">", "")

// parseMessage splits a commit message into its subject, its body and the
// trailers of its last paragraph (when every line of it is "Key: value").
func parseMessage(msg string) (subject, body string, trailers []Trailer) {
	msg = strings.TrimRight(msg, "\n")
	subject, body, _ = strings.Cut(msg, "\n")
	body = strings.TrimLeft(body, "\n")
	paras := strings.Split(body, "\n\n")
	last := paras[len(paras)-1]
	for _, line := range strings.Split(last, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return subject, body, nil
		}
		trailers = append(trailers, Trailer{Key: k, Value: v})
	}
	return subject, body, trailers
}

func commitOf(c *object.Commit) Commit {
	subject, body, trailers := parseMessage(c.Message)
	parents := make([]string, len(c.ParentHashes))
	for i, p := range c.ParentHashes {
		parents[i] = p.String()
	}
	return Commit{
		Hash:      c.Hash.String(),
		Parents:   parents,
		Author:    Signature{c.Author.Name, c.Author.Email},
		Committer: Signature{c.Committer.Name, c.Committer.Email},
		Time:      c.Author.When,
		Subject:   subject,
		Body:      body,
		Trailers:  trailers,
	}
}

// encodeCommit returns the git encoding of a commit object, its
// identities made safe for git's format first.
func encodeCommit(tree plumbing.Hash, parents []plumbing.Hash, author, committer Signature, when time.Time, msg string) ([]byte, error) {
	author, committer = author.safe(), committer.safe()
	return gd.EncodeCommit(tree, parents,
		object.Signature{Name: author.Name, Email: author.Email, When: when},
		object.Signature{Name: committer.Name, Email: committer.Email, When: when}, msg)
}
