// Package lock holds the locks a gitmem process waits for, each of which
// a context (a request that goes away) or the repository's closing ends:
//
//   - Mutex, a mutex whose Lock gives up;
//   - Writer, the repository's writer lease: this process's writer turn
//     (a Mutex), and the two lock files every gitmem process on the
//     machine shares, .git/gitmem/lock (one writer at a time) and
//     .git/gitmem/intent (held by a process waiting for the lock: it
//     tells the holder to let go, and queues the waiters).
//
// The turn is taken before the lock files, and the intent file before the
// lock file. Package gitmem says what taking the lease means (loading
// what others committed, replaying a crashed holder's log); this package
// only waits.
package lock
