// Package stores is gitmem's side of many memories: a directory of named
// stores, each its own gitmem repository, with metadata (a description for
// the model, the operator's key/value pairs, archived or not, a secret
// screening mode) kept in the store's own history; opened on demand and
// closed when idle, so a directory of any size costs what its active stores
// cost.
//
// It also holds the operator operations that the CLI and the HTTP operator
// API share (memory listing and edits with preconditions, version listing,
// revision resolution), so that each has one implementation.
//
// It knows nothing of HTTP or the tool protocol.
package stores
