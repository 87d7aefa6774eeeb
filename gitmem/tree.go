package gitmem

import (
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// node is one entry of the in-memory copy of HEAD's tree. Nodes are
// immutable once published: an edit copies the nodes along its path (and
// only those), so a mutation costs O(depth) node copies, an abandoned edit
// leaves the published tree untouched, and unchanged subtrees keep their
// hashes and are never re-encoded.
type node struct {
	mode  filemode.FileMode
	hash  plumbing.Hash // blob or tree hash; zero for a tree not yet encoded
	size  int64         // file: its size; folder: total size of the files beneath
	files int           // folder: number of files beneath
	// kids is a folder's entries in git's order, where a folder sorts as
	// if its name ended in "/" (which is also the byte order of the paths
	// beneath). A tree is encoded from them as they stand, two versions of
	// a folder are compared in one pass, and an edit copies a slice of
	// names and pointers: no map to clone, no sort at each commit.
	kids []kid
}

// kid is one entry of a folder.
type kid struct {
	name string
	n    *node
}

func (n *node) isDir() bool { return n != nil && n.mode == filemode.Dir }

// isFile reports whether n is a regular file the model can see. Symlinks
// and submodules are kept in the tree but are invisible to the tool.
func (n *node) isFile() bool {
	return n != nil && (n.mode == filemode.Regular || n.mode == filemode.Executable || n.mode == filemode.Deprecated)
}

// newDir is the folder of kids (distinct names), which it puts in git's
// order.
func newDir(kids []kid) *node {
	slices.SortFunc(kids, compareKids)
	d := &node{mode: filemode.Dir, kids: kids}
	for _, k := range kids {
		d.count(k.n, 1)
	}
	return d
}

func compareKids(a, b kid) int { return gd.CompareNames(a.name, a.n.isDir(), b.name, b.n.isDir()) }

// find returns the position of folder d's kid called name, or -1. A name
// sorts apart as a file and as a folder: it is looked for as both.
func (d *node) find(name string) int {
	for _, dir := range [2]bool{false, true} {
		if i, ok := slices.BinarySearchFunc(d.kids, name, func(k kid, name string) int {
			return gd.CompareNames(k.name, k.n.isDir(), name, dir)
		}); ok {
			return i
		}
	}
	return -1
}

// kid returns the kid of folder d called name, or nil (also when d is
// not a folder).
func (d *node) kid(name string) *node {
	if !d.isDir() {
		return nil
	}
	if i := d.find(name); i >= 0 {
		return d.kids[i].n
	}
	return nil
}

// zipKids calls fn for every name among the kids of a and of b (either
// may be nil or not a folder), in git's order, with the kid of each (nil
// when it has none). A name that is a file in one and a folder in the
// other comes twice, once for each.
func zipKids(a, b *node, fn func(name string, x, y *node)) {
	var ak, bk []kid
	if a.isDir() {
		ak = a.kids
	}
	if b.isDir() {
		bk = b.kids
	}
	i, j := 0, 0
	for i < len(ak) || j < len(bk) {
		c := 0
		switch {
		case j == len(bk):
			c = -1
		case i == len(ak):
			c = 1
		default:
			c = compareKids(ak[i], bk[j])
		}
		switch {
		case c < 0:
			fn(ak[i].name, ak[i].n, nil)
			i++
		case c > 0:
			fn(bk[j].name, nil, bk[j].n)
			j++
		default:
			fn(ak[i].name, ak[i].n, bk[j].n)
			i++
			j++
		}
	}
}

// sameNode reports whether a and b are known to be the same file or tree.
func sameNode(a, b *node) bool {
	return a == b || (a != nil && b != nil && a.mode == b.mode && !a.hash.IsZero() && a.hash == b.hash)
}

// count adds kid k's size and files to folder d's totals (sign 1), or
// takes them away (sign -1).
func (d *node) count(k *node, sign int) {
	switch {
	case k.isDir():
		d.size += int64(sign) * k.size
		d.files += sign * k.files
	case k.isFile():
		d.size += int64(sign) * k.size
		d.files += sign
	}
}

func split(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// lookup returns the node at slash path p under root, or nil.
func lookup(root *node, p string) *node {
	n := root
	for p != "" {
		s := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			s, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if !n.isDir() {
			return nil
		}
		n = n.kid(s)
		if n == nil {
			return nil
		}
	}
	return n
}

// with returns a copy of root in which path p holds leaf (nil: removed).
// Missing folders on the way are created; folders left empty by a removal
// are pruned, as git has no empty folders. A file or other non-folder on
// the way is an ErrNotDir.
func with(root *node, p []string, leaf *node) (*node, error) {
	if len(p) == 0 {
		return leaf, nil
	}
	if root == nil {
		if leaf == nil {
			return nil, nil
		}
		child, err := with(nil, p[1:], leaf)
		if err != nil {
			return nil, err
		}
		return newDir([]kid{{p[0], child}}), nil
	}
	if !root.isDir() {
		return nil, ErrNotDir
	}
	i := root.find(p[0])
	var old *node
	if i >= 0 {
		old = root.kids[i].n
	}
	child, err := with(old, p[1:], leaf)
	if err != nil {
		return nil, err
	}
	kids := edited(root.kids, i, p[0], child)
	if len(kids) == 0 {
		return nil, nil
	}
	d := &node{mode: filemode.Dir, kids: kids, size: root.size, files: root.files}
	d.count(old, -1)
	d.count(child, 1)
	return d, nil
}

// edited is a copy of kids (in git's order) in which kid i (-1: none)
// is replaced by child, called name (nil: removed). A kid that stays a
// file or a folder keeps its place; else the new kid is put in its own.
func edited(kids []kid, i int, name string, child *node) []kid {
	if i >= 0 && child != nil && kids[i].n.isDir() == child.isDir() {
		out := slices.Clone(kids)
		out[i].n = child
		return out
	}
	out := make([]kid, 0, len(kids)+1)
	for j, k := range kids {
		if j != i {
			out = append(out, k)
		}
	}
	if child != nil {
		j, _ := slices.BinarySearchFunc(out, kid{name, child}, compareKids)
		out = slices.Insert(out, j, kid{name, child})
	}
	return out
}

// treeFromIndex builds the tree from the index gitmem read at start, if
// its entries make exactly the tree treeHash (every tree is encoded and
// hashed to check; a path is there once): no tree object is read, and a
// file's size comes from its vouched lstat data (only the others are
// looked up). nil when the index does not match (git changed it, or there
// is none; an index of no entries matches the empty tree). The entries
// are sorted by path (readStartIndex), so a folder's are one run of them,
// in git's order of its kids. Called with objects.mu held.
func (r *Repo) treeFromIndex(si *startIndex, treeHash plumbing.Hash) *node {
	if si == nil {
		return nil
	}
	entries := si.list()
	files := make([]node, len(entries)) // one allocation for every file's node
	var stack []kid                     // the kids of the folders being built, innermost last
	// build makes the folder of entries[lo:hi], the entries whose paths
	// begin with its path, at bytes [0, at).
	var build func(lo, hi, at int) *node
	build = func(lo, hi, at int) *node {
		base := len(stack)
		for i := lo; i < hi; {
			e := &entries[i]
			rest := e.Path[at:]
			if j := strings.IndexByte(rest, '/'); j >= 0 {
				name := rest[:j+1] // with its slash: the folder's run
				k := i + 1
				for k < hi && strings.HasPrefix(entries[k].Path[at:], name) {
					k++
				}
				sub := build(i, k, at+len(name))
				if sub == nil {
					return nil
				}
				stack = append(stack, kid{name[:j], sub})
				i = k
				continue
			}
			if i > lo && entries[i-1].Path == e.Path {
				return nil // a path twice
			}
			n := &files[i]
			n.mode, n.hash = e.Mode, e.Hash
			if n.isFile() {
				if e.Stat.IsZero() {
					size, err := r.objects.st.Size(n.hash)
					if err != nil {
						return nil
					}
					n.size = size
				} else {
					n.size = e.Stat.Size()
				}
			}
			stack = append(stack, kid{rest, n})
			i++
		}
		n := newDir(slices.Clone(stack[base:]))
		stack = stack[:base]
		n.hash = plumbing.ComputeHash(plumbing.TreeObject, encodeTree(n))
		return n
	}
	if n := build(0, len(entries), 0); n != nil && n.hash == treeHash {
		return n
	}
	return nil
}

// walkFiles calls fn for every regular file under n, in byte order of path.
func walkFiles(n *node, prefix string, fn func(p string, f *node)) {
	if n.isFile() {
		fn(prefix, n)
		return
	}
	if !n.isDir() {
		return
	}
	for _, k := range n.kids { // git's order: the paths' byte order
		walkFiles(k.n, join2(prefix, k.name), fn)
	}
}

// changedFiles calls fn for every path under prefix where a and b (trees
// or files, nil for absent) do not hold the same regular file: changed,
// added or removed, in either. Subtrees whose hashes match are skipped.
func changedFiles(a, b *node, prefix string, fn func(p string)) {
	if sameNode(a, b) {
		return
	}
	if a.isFile() || b.isFile() {
		fn(prefix)
	}
	zipKids(a, b, func(name string, x, y *node) {
		changedFiles(x, y, join2(prefix, name), fn)
	})
}

// encodeTree is the git encoding of a folder whose children all have
// hashes: its entries, in git's order.
func encodeTree(n *node) []byte {
	size := 0
	for _, k := range n.kids {
		size += gd.EntrySize(k.name)
	}
	b := make([]byte, 0, size)
	for _, k := range n.kids {
		b = gd.AppendEntry(b, k.name, k.n.mode, k.n.hash)
	}
	return b
}
