package gitmem

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// logFiles is the write-ahead log (gitdir.WAL): two files, appends going
// to one while a checkpoint empties the other.
type logFiles struct {
	// mu guards files, active and draining. A group's writer holds it
	// across the group's append, its fdatasync and its publication
	// (appending). In the lock order it comes after the disk lock (disk.mu)
	// and before the committer's queue lock (queueMu), the published state's
	// (published.mu) and the history index's (historyIndex.mu).
	mu       sync.Mutex
	files    [2]*gd.WAL // nil before open and after close
	active   int        // the file appends go to
	draining int        // the file a failed checkpoint switched from, which still holds changes; -1 if none
	began    time.Time  // when the file appends go to took its first record since it was emptied
	bytes    atomic.Int64
}

// appending is proof that logFiles.mu is held: one group is written at
// a time (committer's durable).
type appending struct{ l *logFiles }

// beginAppend takes the log for one group; end gives it back.
func (l *logFiles) beginAppend() appending {
	l.mu.Lock()
	return appending{l}
}

func (a appending) end() { a.l.mu.Unlock() }

// append writes recs to the file appends go to and fdatasyncs once: the
// commit point. full says the file holds more than checkpointBytes (a
// checkpoint is due).
func (a appending) append(recs []gd.WALRecord) (full bool, err error) {
	l := a.l
	w := l.files[l.active]
	if w.Len() == 0 {
		l.began = time.Now()
	}
	err = w.Append(recs)
	l.noteBytes()
	return err == nil && w.Len() > checkpointBytes, err
}

// open opens the two log files (.git/gitmem/wal and wal2) and returns
// the records they hold, oldest first: changes a holder of the writer
// lock acknowledged and crashed before its checkpoint made git's.
func (l *logFiles) open(env *gd.Env, gitDir string) ([]gd.WALRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var recs [2][]gd.WALRecord
	for i, name := range []string{"wal", "wal2"} {
		w, rs, err := gd.OpenWAL(env, gitDir, name)
		if err != nil {
			for _, w := range l.files[:i] {
				w.Close()
			}
			return nil, walOpenError(name, err)
		}
		l.files[i], recs[i] = w, rs
	}
	l.noteBytes()
	first := 0
	if l.files[1].Gen() < l.files[0].Gen() {
		first = 1
	}
	l.active = 1 - first // appends go to the newer file
	l.draining = -1
	return append(recs[first], recs[1-first]...), nil
}

// walOpenError words a log file .git/gitmem/NAME that gd.OpenWAL could
// not open, or gd.ReadWAL read (a reader's look at it says what a
// writer's open would). What the file holds, or a folder, a FIFO, a socket or a
// device in its place, is damage (a *DamagedError, whose Problem a
// client may be shown: it names the file from .git/ on, never a host
// path). Any other refusal of the system's is not: the store's folder
// gone while it opened (ENOENT, ENOTDIR: a store being deleted), out of
// files (EMFILE, ENFILE), an I/O error, a permission. It is a
// *StorageError, which says what failed without a host path, and which
// a retry or the operator's fix of the server mends; gitmem fsck finds
// nothing to repair.
func walOpenError(name string, err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.EISDIR):
		return &DamagedError{Problem: "the write-ahead log .git/gitmem/" + name + " is a folder, not a file",
			Repair: "move it aside and run gitmem fsck"}
	case errors.Is(err, gd.ErrNotRegular):
		return &DamagedError{Problem: "the write-ahead log .git/gitmem/" + name + " is not a regular file",
			Repair: "move it aside and run gitmem fsck"}
	case errors.As(err, &errno): // an open's, a write's, a rename's (a new file's)
		return &StorageError{Op: "open the write-ahead log .git/gitmem/" + name, Err: err}
	}
	return &DamagedError{Problem: fmt.Sprintf("the write-ahead log .git/gitmem/%s cannot be read (%s)", name, scrubPaths(err)),
		Repair: "if gitmem was not killed while writing it, move it aside and run gitmem fsck"}
}

// noteBytes records what the log files hold. Called with mu held.
func (l *logFiles) noteBytes() {
	var n int64
	for _, w := range l.files {
		if w != nil {
			n += w.Len()
		}
	}
	l.bytes.Store(n)
}

// size is what both files hold, in bytes (read without mu: awaitBacklog).
func (l *logFiles) size() int64 { return l.bytes.Load() }

// isClosed says the files are not open (closeLog; or never opened).
func (l *logFiles) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.files[l.active] == nil
}

// fill is what the file appends go to holds, and whether it is nearly
// full while the other takes more: a checkpoint then switches to the
// other now rather than grow this one while the writers wait.
func (l *logFiles) fill() (size int64, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, o := l.files[l.active], l.files[1-l.active]; w != nil && o != nil {
		size = w.Len()
		full = l.draining < 0 && size > w.Cap()*3/4 && o.Cap() > w.Cap()
	}
	return size, full
}

// switchOut makes appends go to the other file (a checkpoint's first
// step) and returns the file to empty once a sync covers what it holds:
// the one a failed checkpoint left, if any (then appends do not switch
// again). -1: the log holds nothing git's files lack once materialised.
// Called with the disk lock held (dt), which keeps draining as it is
// until emptied.
func (l *logFiles) switchOut(_ diskTurn) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining < 0 {
		cur, next := l.files[l.active], l.files[1-l.active]
		if cur.Len() == 0 {
			return -1, nil
		}
		if next.Len() != 0 { // cannot happen: a file is emptied before it is switched to
			return -1, &StorageError{Op: "switch the write-ahead log", Err: errors.New("both log files hold changes")}
		}
		if err := next.Renew(max(cur.Gen(), next.Gen()) + 1); err != nil { // empty already: no sync needed (Renew)
			return -1, wrap("switch the write-ahead log", err)
		}
		l.draining, l.active = l.active, 1-l.active
	}
	return l.draining, nil
}

// emptied empties file i, which switchOut returned, once git's files hold
// (durably) everything it does.
func (l *logFiles) emptied(i int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.files[i].Reset(max(l.files[0].Gen(), l.files[1].Gen()) + 1)
	if err == nil {
		l.draining = -1
	}
	l.noteBytes()
	return err
}

// empty empties both log files once git's files hold all they do.
func (l *logFiles) empty() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	gen := max(l.files[0].Gen(), l.files[1].Gen()) + 1
	defer l.noteBytes()
	for i, w := range l.files {
		if err := w.Reset(gen + uint32(i)); err != nil {
			return wrap("empty the write-ahead log", err)
		}
	}
	l.active, l.draining = 1, -1
	return nil
}

// growSpare makes the file appends do not go to large enough for a
// checkpoint's period (every) of load, once the one they go to has taken spareAt bytes
// (prepareSpareLog says why): spareWant of what that one took since it
// was emptied. Called with the disk lock held (dt): the spare's size
// changes under it alone, and whoever reads it holds it (the checkpoint,
// close, scrub) or is the maintenance loop.
func (l *logFiles) growSpare(_ diskTurn, gitDir string, every time.Duration) error {
	l.mu.Lock()
	var cur, spare *gd.WAL
	if l.draining < 0 {
		cur, spare = l.files[l.active], l.files[1-l.active]
	}
	if cur == nil || spare == nil || cur.Len() < spareAt {
		l.mu.Unlock()
		return nil
	}
	want := spareWant(cur.Len(), time.Since(l.began), every)
	l.mu.Unlock()
	// Grown when it takes less than half of that (a few times as a load
	// rises, not at every poll). Not on a file system short of space: the
	// calls' own writes come first (a log file that must grow still
	// grows, as it needs).
	if spare.Cap() < want/2 && gd.FreeSpace(gitDir) >= 16*(want-spare.Cap()) {
		return spare.GrowTo(want)
	}
	return nil
}

// spareWant is how many bytes the spare log file is to take when the one
// appends go to took n in d since it was emptied: twice what a
// checkpoint's period (every) takes at that rate (d counted as at least
// a tenth of it: one large record is no rate), at least n, at most
// spareCap. A store under a light load keeps small files: at spareCap
// each, 100 stores each wrote 20 MiB of zeros at their first change
// after a start.
func spareWant(n int64, d, every time.Duration) int64 {
	d = max(d, every/10)
	return min(max(n, 2*int64(float64(n)*float64(every)/float64(d))), spareCap)
}

// close closes the log files: they stay on disk, for the next holder of
// the writer lock; at exit, an empty one goes back to its first size
// (gd.WAL.Shrink). Called with the disk lock held (dt): not while
// growSpare grows one.
func (l *logFiles) close(_ diskTurn, exit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, w := range l.files {
		if w != nil {
			if exit {
				w.Shrink() // best effort: a larger file is only disk space
			}
			w.Close()
		}
		l.files[i] = nil
	}
}

// scrub overwrites the log files with zeros: they still hold old records
// (the redacted content among them) after a checkpoint. Called with the
// disk lock held (dt; not while growSpare grows one).
func (l *logFiles) scrub(_ diskTurn, env *gd.Env, gitDir string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, name := range []string{"wal", "wal2"} {
		var err error
		if w := l.files[i]; w != nil {
			err = w.Scrub()
		} else {
			err = gd.ScrubWAL(env, gitDir, name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// records is how many records the log files hold (changes acknowledged
// since the last checkpoint emptied them).
func (l *logFiles) records() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.files {
		if w != nil {
			n += w.Records()
		}
	}
	return n
}

// gone says a log file is no longer on disk where a start reads it (the
// repository was deleted or moved while open).
func (l *logFiles) gone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.files[:], func(w *gd.WAL) bool { return w != nil && w.Gone() })
}
