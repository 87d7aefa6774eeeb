package gitmem

import (
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// Info describes a file or folder of the memory.
type Info struct {
	Name  string
	Dir   bool
	Size  int64 // a file's size; for a folder, the total of the files beneath
	Files int   // for a folder, the number of files beneath
}

// Usage is how much the memory holds.
type Usage struct {
	Files int
	Bytes int64
}

// View is an immutable snapshot of the memory. Paths are relative to the
// memories folder, slash-separated, already validated: "" is the root,
// "notes/todo.md" a file in a folder.
type View struct {
	r       *Repo
	root    *node // the repository's root tree
	head    plumbing.Hash
	pending map[plumbing.Hash][]byte // blobs written in a transaction, not yet stored
	reads   *[]string                // a transaction's: the paths it looked at
}

func full(p string) string {
	if p == "" {
		return memDir
	}
	return memDir + "/" + p
}

// Head is the commit the view shows ("" before the first commit).
func (v *View) Head() string {
	if v.head.IsZero() {
		return ""
	}
	return v.head.String()
}

// get returns the visible node at p: a folder or a regular file. The
// memory root always exists, even while it holds nothing.
func (v *View) get(p string) *node {
	if v.reads != nil {
		*v.reads = append(*v.reads, p)
	}
	n := lookup(v.root, full(p))
	if n == nil && p == "" {
		return &node{mode: filemode.Dir}
	}
	if !n.isDir() && !n.isFile() {
		return nil
	}
	return n
}

func infoOf(name string, n *node) Info {
	if n.isDir() {
		return Info{Name: name, Dir: true, Size: n.size, Files: n.files}
	}
	return Info{Name: name, Size: n.size}
}

// Stat describes p, or returns ErrNotExist.
func (v *View) Stat(p string) (Info, error) {
	n := v.get(p)
	if n == nil {
		return Info{}, ErrNotExist
	}
	return infoOf(path.Base(p), n), nil
}

// blobFromWorktreeMax bounds what a transaction reads from the worktree
// rather than git's objects (memory files are small).
const blobFromWorktreeMax = 1 << 20

// ReadFile returns the content of the file p: ErrNotExist, or ErrIsDir.
func (v *View) ReadFile(p string) ([]byte, error) {
	n := v.get(p)
	switch {
	case n == nil:
		return nil, ErrNotExist
	case n.isDir():
		return nil, ErrIsDir
	}
	if data, ok := v.pending[n.hash]; ok {
		return data, nil
	}
	// A transaction's read, holding the writer lock: the worktree's copy
	// when it is the blob, a file read, where git's objects resolve a
	// pack's delta chain, a read and an inflate a link. Under 64 clients
	// the read from the pack was more than a quarter of Update's CPU (pprof
	// of serve: 0.51 s of 1.79 s; from the worktree, 0.09 s of 2.16 s).
	if v.reads != nil && n.size <= blobFromWorktreeMax {
		if data, ok := v.r.mirror.readBlob(full(p), n); ok {
			return data, nil
		}
	}
	data, err := v.r.objects.readBlob(n.hash)
	return data, wrap("read a file", err)
}

// List returns the files and folders directly in folder p, in byte order
// of name: ErrNotExist, or ErrNotDir when p is a file.
func (v *View) List(p string) ([]Info, error) {
	n := v.get(p)
	switch {
	case n == nil:
		return nil, ErrNotExist
	case !n.isDir():
		return nil, ErrNotDir
	}
	var out []Info
	for _, k := range n.kids {
		if k.n.isDir() || k.n.isFile() {
			out = append(out, infoOf(k.name, k.n))
		}
	}
	// By name: git's order puts a folder "a" after a file "a.b".
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Usage is the number and total size of the memory's files.
func (v *View) Usage() Usage {
	n := lookup(v.root, memDir)
	if !n.isDir() {
		return Usage{}
	}
	return Usage{Files: n.files, Bytes: n.size}
}

// Tx is a transaction: a View plus edits, all of which become one commit
// when the function given to Repo.Update returns nil.
type Tx struct {
	View
	base   *node           // the tree the transaction started from
	merged []plumbing.Hash // further parents of the commit (a merge)
	// A pull (share.go): ff moves the branch to this fetched commit
	// instead of committing; mergedIDs are the tool_use ids the commits a
	// merge or fast-forward brings had applied.
	ff        plumbing.Hash
	mergedIDs map[string]plumbing.Hash
	pulled    [][2]string // a pull's: where the renames it brings moved files (repository paths, in order: prepared.moves)
	ops       []op
	trailers  []Trailer  // set in the commit message by SetTrailer
	extra     []Trailer  // appended to the commit message by AddTrailer
	subject   string     // replaces the Meta's subject when set
	mirror    bool       // apply to the worktree after the commit
	adopt     *adoptNote // an adopt's, for its commit (prepared.adopt)
	// checked are memory paths a merge looked at for hand edits before it
	// took the writer turn (merger.commit): Update does not look at them
	// again under it (an edit made since is one made after the commit,
	// which the worktree's follow keeps, keepHandEdits).
	checked pathSet
}

// SetSubject replaces the commit's subject, for changes whose subject
// depends on what they found.
func (tx *Tx) SetSubject(s string) { tx.subject = s }

// SetTrailer adds a trailer to the commit, known only once the change is
// made (the line a str_replace edited), or sets its value if the commit's
// Meta already has the key.
func (tx *Tx) SetTrailer(key, value string) {
	tx.trailers = append(tx.trailers, Trailer{Key: key, Value: value})
}

type op struct {
	kind     byte // 'w'rite, 'r'emove, 'm'ove
	from, to string
}

// WriteFile creates or replaces the file p, creating missing folders.
// Errors: ErrIsDir (p is a folder), ErrNotDir (a parent is a file).
func (tx *Tx) WriteFile(p string, data []byte) error {
	if p == "" {
		return ErrIsDir
	}
	if err := checkRel(p); err != nil {
		return err
	}
	mode := filemode.Regular
	if old := lookup(tx.root, full(p)); old != nil {
		if old.isDir() {
			return ErrIsDir
		}
		if old.mode == filemode.Executable {
			mode = filemode.Executable
		}
	}
	h := plumbing.ComputeHash(plumbing.BlobObject, data)
	root, err := with(tx.root, split(full(p)), &node{mode: mode, hash: h, size: int64(len(data))})
	if err != nil {
		return err
	}
	tx.pending[h] = data
	tx.root = root
	tx.ops = append(tx.ops, op{kind: 'w', to: p})
	return nil
}

// Remove deletes the file or folder p (a folder with all it holds).
// Errors: ErrRoot, ErrNotExist.
func (tx *Tx) Remove(p string) error {
	if p == "" {
		return ErrRoot
	}
	if err := checkRel(p); err != nil {
		return err
	}
	if tx.get(p) == nil {
		return ErrNotExist
	}
	root, err := with(tx.root, split(full(p)), nil)
	if err != nil {
		return err
	}
	tx.root = root
	tx.ops = append(tx.ops, op{kind: 'r', from: p})
	return nil
}

// Rename moves the file or folder from to to, creating missing folders.
// Errors: ErrRoot, ErrNotExist, ErrExist, ErrInsideItself, ErrNotDir.
func (tx *Tx) Rename(from, to string) error {
	if from == "" {
		return ErrRoot
	}
	if err := checkRel(from); err != nil {
		return err
	}
	if err := checkRel(to); err != nil {
		return err
	}
	// A file made by hand at to, under it or in its way, that the tree
	// does not hold: one an adopt left (for want of room, over the size
	// limit) or made since the last, or one the next adopt takes there.
	// The worktree's follow would write the model's file over it, the
	// hand file then merged with it between conflict markers: the
	// destination exists, or a parent folder is a file. (Where the memory
	// has room, the adopt after the call takes it, and the call runs
	// again.) In the order the protocol checks them.
	made := tx.madeByHand(to)
	above := made != "" && strings.HasPrefix(to, made+"/")
	n := tx.get(from)
	switch {
	case made != "" && !above: // where the handler's look at the tree found nothing
		return ErrExist
	case n == nil:
		return ErrNotExist
	case to == "" || lookup(tx.root, full(to)) != nil:
		return ErrExist
	case strings.HasPrefix(to, from+"/") && n.isDir():
		return ErrInsideItself
	case strings.HasPrefix(to, from+"/") || above:
		return ErrNotDir // a file below itself: its parent would be the file; or one made by hand
	}
	root, err := with(tx.root, split(full(from)), nil)
	if err != nil {
		return err
	}
	if root, err = with(root, split(full(to)), n); err != nil {
		return err
	}
	tx.root = root
	tx.ops = append(tx.ops, op{kind: 'm', from: from, to: to})
	return nil
}

// HandMade reports whether the worktree holds a file made by hand at p or
// under it that no commit holds: one an adopt left (for want of room,
// over the size limit) or made since the last, or one kept elsewhere that
// the next adopt takes there (made in a folder as the model renamed it);
// ErrNotDir when one is in p's way. A change that made a file at p would
// have the worktree's follow write it over that one (Rename refuses:
// ErrExist, ErrNotDir).
// Gitmem's unfinished work there (a removal the worktree has yet to
// follow) is none.
func (tx *Tx) HandMade(p string) (bool, error) {
	if err := checkRel(p); err != nil {
		return false, err
	}
	made := tx.madeByHand(p)
	if made != "" && strings.HasPrefix(p, made+"/") {
		return false, ErrNotDir
	}
	return made != "", nil
}

// madeByHand is the first file (relative to memories/) made by hand at,
// under or in the way of the memory path p, which the transaction does
// not hold ("": none, or p is there).
//
// A file found is noted as read: the adopt that follows the transaction
// looks at p (Update), and at the file of a hand edit bound for p (one
// made in a folder as the model renamed it, kept where it was made until
// the adopt), takes what it can (a hand edit kept where a rename moved
// its file away goes with the file; a file made by hand where the memory
// has room is committed), and runs it again.
func (tx *Tx) madeByHand(p string) string {
	if p == "" || lookup(tx.root, full(p)) != nil {
		return ""
	}
	made, from, err := tx.r.mirror.madeByHand(tx.base, full(p))
	if err != nil {
		// A look that failed (out of file descriptors, say) fails no
		// call of the model's: it goes on as it did before the look
		// was made, a file made by hand there merged with its own by
		// the next adopt, between conflict markers, nothing lost.
		return ""
	}
	if made != "" && tx.reads != nil {
		*tx.reads = append(*tx.reads, p)
		if from != "" {
			*tx.reads = append(*tx.reads, from[len(memDir)+1:])
		}
	}
	return made
}

// looked lists the memory paths the transaction read or changed.
func (tx *Tx) looked() []string {
	return union(*tx.reads, tx.Paths())
}

// unchecked is looked without the paths tx.checked names: those Update
// looks at for hand edits under the writer turn.
func (tx *Tx) unchecked() []string {
	ps := tx.looked()
	if tx.checked != nil {
		ps = slices.DeleteFunc(ps, func(p string) bool { return tx.checked[p] })
	}
	return ps
}

// touched lists the repository paths the transaction changed.
func (tx *Tx) touched() []string {
	var out []string
	for _, p := range tx.Paths() {
		out = append(out, full(p))
	}
	return out
}

func (tx *Tx) blob(h plumbing.Hash) ([]byte, error) {
	if data, ok := tx.pending[h]; ok {
		return data, nil
	}
	return tx.r.objects.readBlob(h)
}
