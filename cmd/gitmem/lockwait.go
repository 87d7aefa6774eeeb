package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// A command that writes waits for the memory's writer lock while another
// process holds it (another gitmem, as a rule): a serve lets it go within a second once a
// command waits, a gc or a redaction when it is done, and a process whose
// checkpoint keeps failing (a full disk: its write-ahead log holds
// acknowledged changes git's files cannot take yet) not until one
// succeeds. So the wait is said on stderr a second into it, and given up
// after --lock-wait with exit code 5 (exitLocked), nothing changed.

// withLockWait gives opt the command's bound on the wait for the writer
// lock (--lock-wait), the line it says a second into it (once per
// command), and the name another process waiting for the lock is told
// this one has.
func withLockWait(c *cli.Context, opt gitmem.Options) gitmem.Options {
	opt.LockWait = c.Duration("lock-wait")
	opt.Process = processName(c)
	var once sync.Once
	opt.Waiting = func(h gitmem.Holder) {
		once.Do(func() {
			bound := "it waits as long as it takes (--lock-wait 0)"
			if opt.LockWait > 0 {
				bound = fmt.Sprintf("gives up after %v (--lock-wait)", opt.LockWait)
			}
			fmt.Fprintf(c.App.ErrWriter, "gitmem: waiting for the writer lock of this memory: %s; %s\n", heldBy(h), bound)
		})
	}
	return opt
}

// processName is the command as another gitmem process waiting for the
// writer lock is told it: "gitmem serve", "gitmem store delete".
func processName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return "gitmem"
}

// heldBy says which process holds the writer lock (its pid and name as
// the kernel tells them, when it does), and why it keeps it when it
// recorded why (its checkpoint fails). Only a gitmem process writes that
// record (.git/gitmem/holder); the lock file itself says nothing of its
// holder, which may be any program (flock .git/gitmem/lock sleep 100):
// one that recorded nothing is "another process", with the name the
// kernel gives it.
func heldBy(h gitmem.Holder) string {
	if h.Pid == 0 && h.Locker != 0 { // named by the kernel (Linux), not recorded
		return fmt.Sprintf("another process holds it (pid %d, %s)", h.Locker, policy.ClipName(h.LockerName))
	}
	if h.Pid == 0 {
		return "another process holds it"
	}
	return fmt.Sprintf("another gitmem process holds it (pid %d, %s): its checkpoint has failed since %s (%s), and it keeps the lock until git's files take its acknowledged changes",
		h.Pid, policy.ClipName(h.Process), h.Since.In(time.Local).Format(timeLayout), policy.Printable(policy.Clip(h.Failing, maxFailingShown)))
}

// maxFailingShown is how much of a holder's recorded failure heldBy
// prints. What the record holds (.git/gitmem/holder, which anyone who
// can write .git can write) is printed escaped: no control or
// bidirectional character reaches the terminal.
const maxFailingShown = 256

// lockHeldErr words a wait for the writer lock given up (exitLocked).
func lockHeldErr(e *gitmem.LockHeldError) error {
	h := e.Holder
	msg := fmt.Sprintf("gave up after %v waiting for the writer lock of this memory: %s; nothing was changed", e.Waited, heldBy(h))
	if h.Pid == 0 {
		return failf(exitLocked, "%s (a serve lets the lock go within a second of a command asking for it; a gc, redaction or fsck --repair keeps it until done): run the command again, or give it longer with --lock-wait", msg)
	}
	return failf(exitLocked, "%s. Those changes are safe in its write-ahead log: %s; then run this command again", msg, heldRepair(h))
}

// heldRepair says what ends a failing holder's hold of the writer lock.
func heldRepair(h gitmem.Holder) string {
	if strings.Contains(h.Failing, "no space left on device") {
		return "free space on the disk, and that process writes them to git's files itself and lets the lock go"
	}
	return "once what fails is mended, that process writes them to git's files itself and lets the lock go"
}
