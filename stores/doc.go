// Package stores is gitmem's side of many memories: a directory of named
// stores, each its own gitmem repository, with metadata (a description for
// the model, the operator's key/value pairs, archived or not, a secret
// screening mode) kept in the store's own history; opened on demand and
// closed when idle, so a directory of any size costs what its active stores
// cost.
//
// What an operator does to one memory (listing, edits with preconditions,
// versions) is package operator's.
//
// It knows nothing of HTTP or the tool protocol.
package stores
