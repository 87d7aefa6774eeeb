// Command gitmem serves Claude's memory tool over a git repository and
// gives operators the history of what the model remembered.
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// Exit codes, in one place.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // the command line was wrong
	exitNoRepo  = 3 // --repo is not a gitmem repository
	exitRemote  = 4 // store import, export: the Memory Stores API could not be reached, or refused or failed a request
	exitLocked  = 5 // another process held the memory's writer lock for all of --lock-wait: nothing was changed
)

// exitError carries an exit code and the message the user sees.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func failf(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}
