package gitmem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// A process that keeps the writer lock while its checkpoint fails (a
// full disk: the write-ahead log took the changes, git's files cannot)
// does not let the lock go until a checkpoint succeeds: the log is the
// only copy of those changes. Another process waiting for the lock
// meanwhile is told what it waits for from .git/gitmem/holder, which the
// holder writes when its checkpoint begins to fail (or fails for another
// reason) and clears when one succeeds, or as it lets the lock go. A
// healthy process never writes it.
//
// The file is made, 1 KiB of zeros, at a writer's start (on a full disk
// with a block of the reserve), and is written in place: on a full disk
// no new block is needed. A record is one line,
// its CRC-32 in hex, a space and JSON; a read that catches a write half
// done fails the sum and counts as no record. A record whose process no
// longer runs (pid gone, or another process's start time) is none.

const (
	holderName  = "holder" // in .git/gitmem
	holderBytes = 1024
)

// Holder is what a process waiting for the writer lock knows of the
// process that holds it: what that process recorded while its checkpoint
// fails. The zero Holder: nothing recorded (a holder whose checkpoints
// succeed lets the lock go after its next one; a gc or redaction holds
// it until it is done).
type Holder struct {
	Pid     int       // the holder's process id (0: nothing recorded)
	Process string    // what it is (Options.Process: "gitmem serve")
	Since   time.Time // when its checkpoint began to fail (its clock)
	Failing string    // why it fails, host paths shortened ("write: no space left on device")
	// Locker is, when nothing is recorded (Pid 0), the process the
	// kernel names as holding the lock file (Linux: /proc/locks), and
	// LockerName its name (/proc/PID/comm); 0 and "" when not told.
	// Only a waiter is told it (Options.Waiting, LockHeldError).
	Locker     int
	LockerName string
}

// holderRecord is Holder as .git/gitmem/holder holds it.
type holderRecord struct {
	Pid     int       `json:"pid"`
	Start   uint64    `json:"start,omitempty"` // the process's start time (gd.ProcessStart), when known
	Process string    `json:"process"`
	Since   time.Time `json:"since"`
	Failing string    `json:"failing"`
}

func holderPath(gitDir string) string { return filepath.Join(gitDir, "gitmem", holderName) }

// makeHolderFile makes .git/gitmem/holder 1 KiB of zeros if it is
// missing or shorter (a writer's start, under the writer lock). On a full
// disk spare (the reserve's) frees a block for it first: a process whose
// checkpoint then fails records why it keeps the lock also where the file
// was missing (a repository an older gitmem made, the file deleted by
// hand) or was left empty (a start on a full disk made it, not its block).
func makeHolderFile(gitDir string, spare func() bool) {
	if err := fillHolderFile(gitDir); errors.Is(err, syscall.ENOSPC) && spare() {
		fillHolderFile(gitDir)
	}
}

// fillHolderFile is makeHolderFile's one try.
func fillHolderFile(gitDir string) error {
	// Made whole by an earlier start, as a rule: one lstat then.
	if fi, err := os.Lstat(holderPath(gitDir)); err == nil && fi.Mode().IsRegular() && fi.Size() >= holderBytes {
		return nil
	}
	f, err := openHolder(gitDir, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err // not a regular file (left alone), or no space for a new one
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() >= holderBytes {
		return nil
	}
	_, err = f.WriteAt(make([]byte, holderBytes), 0)
	return err
}

// openHolder opens .git/gitmem/holder with flag, if it is a regular file:
// not through a symbolic link, not waiting on a named pipe (holderFlags).
func openHolder(gitDir string, flag int) (*os.File, error) {
	f, err := os.OpenFile(holderPath(gitDir), flag|holderFlags, 0o600)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errors.New("gitmem: .git/gitmem/holder is not a regular file")
	}
	return f, nil
}

// writeHolder writes rec over .git/gitmem/holder in place (nil: zeros,
// no record). Best effort: a waiter that finds no record says less.
func writeHolder(gitDir string, rec *holderRecord) error {
	buf := make([]byte, holderBytes)
	if rec != nil {
		// Too long for the file (JSON writes '<' or a control character
		// as 6 bytes), the failure is cut, then the process's name: each
		// cut shortens, so this ends.
		for {
			js, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			line := fmt.Sprintf("%08x %s\n", crc32.ChecksumIEEE(js), js)
			if len(line) <= holderBytes {
				copy(buf, line)
				break
			}
			switch {
			case rec.Failing != "":
				rec.Failing = halveText(rec.Failing)
			case rec.Process != "":
				rec.Process = halveText(rec.Process)
			default:
				return errors.New("gitmem: the holder record does not fit")
			}
		}
	}
	f, err := openHolder(gitDir, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(buf, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// halveText is s cut to half its characters and "...", or "" when that
// would not be shorter.
func halveText(s string) string {
	r := []rune(s)
	if len(r) <= 8 {
		return ""
	}
	return string(r[:len(r)/2]) + "..."
}

// readHolder reads the record of the process holding the writer lock,
// if one that still runs left one (the zero Holder if not).
func readHolder(gitDir string) Holder {
	f, err := openHolder(gitDir, os.O_RDONLY)
	if err != nil {
		return Holder{}
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, holderBytes))
	line, _, ok := bytes.Cut(data, []byte("\n"))
	if !ok || len(line) < 10 || line[8] != ' ' {
		return Holder{}
	}
	var sum uint32
	if _, err := fmt.Sscanf(string(line[:8]), "%08x", &sum); err != nil || sum != crc32.ChecksumIEEE(line[9:]) {
		return Holder{}
	}
	var rec holderRecord
	if json.Unmarshal(line[9:], &rec) != nil || rec.Pid <= 0 || gd.ProcessGone(rec.Pid) {
		return Holder{}
	}
	if start, ok := gd.ProcessStart(rec.Pid); ok && start != rec.Start {
		return Holder{} // the pid is another process's now
	}
	return Holder{Pid: rec.Pid, Process: rec.Process, Since: rec.Since, Failing: rec.Failing}
}

// waitedFor is what a process waiting for the writer lock is told of its
// holder: its record, or else the process the kernel names.
func waitedFor(gitDir string) Holder {
	h := readHolder(gitDir)
	if h.Pid == 0 {
		h.Locker, h.LockerName = gd.LockHolder(filepath.Join(gitDir, "gitmem", "lock"))
	}
	return h
}

// LockHeldError is the error of a call that gave up waiting for the
// writer lock another process held for all of Options.LockWait: nothing
// was changed. Holder is what that process recorded (see Holder).
// Waited 0: the call did not wait, as a holder whose checkpoints fail
// keeps the lock until they succeed (a view's adopt commit).
type LockHeldError struct {
	Waited time.Duration
	Holder Holder
}

func (e *LockHeldError) Error() string {
	s := fmt.Sprintf("gitmem: gave up after %v waiting for the writer lock, which another process holds", e.Waited)
	if e.Waited == 0 {
		s = "gitmem: did not wait for the writer lock, which another process holds"
	}
	switch h := e.Holder; {
	case h.Pid != 0:
		// What the record holds is anyone's who can write .git: escaped.
		s += fmt.Sprintf(" (pid %d, %s, its checkpoint failing since %s: %s)", h.Pid, policy.ClipName(h.Process), h.Since.Format(time.RFC3339), policy.Printable(policy.Clip(h.Failing, maxFailingShown)))
	case h.Locker != 0:
		s += fmt.Sprintf(" (pid %d, %s)", h.Locker, policy.ClipName(h.LockerName)) // a process names itself: escaped
	}
	return s
}

// maxFailingShown is how much of a holder's recorded failure the error
// quotes.
const maxFailingShown = 256

// lockNotice is how long a wait for another process's writer lock lasts
// before Options.Waiting is told.
const lockNotice = time.Second

// waitLock waits for the writer lock with acquire, as opt says: after
// lockNotice it tells opt.Waiting (once) what it waits for; after
// opt.LockWait it gives up with a *LockHeldError, unless a last try
// (try: the lock taken if free, without waiting) takes it: a bound
// over before acquire's first look (--lock-wait 1us) gives up only on a
// lock held. Any other end of the wait (ctx done, acquire's failure) is
// acquire's error. The lock taken, the clean mark goes before anything is
// written (clean.go).
func waitLock(ctx context.Context, opt *Options, gitDir string, acquire func(context.Context) error, try func() (bool, error)) error {
	err := waitLockFor(ctx, opt, gitDir, acquire, try)
	if err == nil {
		dropClean(gitDir)
	}
	return err
}

// waitLockFor is waitLock, the clean mark left alone: a reader's wait
// for the holder to let go (catchUp), which writes nothing.
func waitLockFor(ctx context.Context, opt *Options, gitDir string, acquire func(context.Context) error, try func() (bool, error)) error {
	if opt.LockWait <= 0 && opt.Waiting == nil {
		return acquire(ctx)
	}
	start := time.Now()
	var giveUp time.Time
	if opt.LockWait > 0 {
		giveUp = start.Add(opt.LockWait)
	}
	// The notice is due if it comes before the wait's end (decided
	// here, not by which timer a busy machine fires first).
	noticeAt := start.Add(opt.hooks.lockNotice())
	notice := opt.Waiting != nil && (giveUp.IsZero() || noticeAt.Before(giveUp))
	for {
		until := giveUp
		if notice {
			until = noticeAt
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !until.IsZero() {
			wctx, cancel = context.WithDeadline(ctx, until)
		}
		err := acquire(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if notice {
			notice = false
			opt.Waiting(waitedFor(gitDir))
			continue
		}
		if ok, err := try(); ok || err != nil {
			return err
		}
		return &LockHeldError{Waited: opt.LockWait, Holder: waitedFor(gitDir)}
	}
}
