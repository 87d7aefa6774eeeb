package gitmem

import (
	"maps"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// node is one entry of the in-memory copy of HEAD's tree. Nodes are
// immutable once published: an edit copies the nodes along its path (and
// only those), so a mutation costs O(depth) node copies, an abandoned edit
// leaves the published tree untouched, and unchanged subtrees keep their
// hashes and are never re-encoded.
type node struct {
	mode  filemode.FileMode
	hash  plumbing.Hash    // blob or tree hash; zero for a tree not yet encoded
	size  int64            // file: its size; folder: total size of the files beneath
	files int              // folder: number of files beneath
	kids  map[string]*node // folder only
	// order is a folder's kids' names in git's order, once a tree was
	// encoded: a copy that changes only a kid's content shares it, so
	// that most commits encode their trees without sorting them.
	order []string
}

func (n *node) isDir() bool { return n != nil && n.mode == filemode.Dir }

// isFile reports whether n is a regular file the model can see. Symlinks
// and submodules are kept in the tree but are invisible to the tool.
func (n *node) isFile() bool {
	return n != nil && (n.mode == filemode.Regular || n.mode == filemode.Executable || n.mode == filemode.Deprecated)
}

func newDir(kids map[string]*node) *node {
	d := &node{mode: filemode.Dir, kids: kids}
	for _, k := range kids {
		d.count(k, 1)
	}
	return d
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
		n = n.kids[s]
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
		return newDir(map[string]*node{p[0]: child}), nil
	}
	if !root.isDir() {
		return nil, ErrNotDir
	}
	old := root.kids[p[0]]
	child, err := with(old, p[1:], leaf)
	if err != nil {
		return nil, err
	}
	kids := maps.Clone(root.kids)
	if child == nil {
		delete(kids, p[0])
	} else {
		kids[p[0]] = child
	}
	if len(kids) == 0 {
		return nil, nil
	}
	d := &node{mode: filemode.Dir, kids: kids, size: root.size, files: root.files}
	d.count(old, -1)
	d.count(child, 1)
	switch {
	case old != nil && child != nil && old.isDir() == child.isDir():
		d.order = root.order // the same names, in the same order
	case root.order != nil && len(root.order) == len(root.kids):
		d.order = reordered(root.order, kids, p[0], old != nil, child)
	}
	return d, nil
}

// reordered is a folder's order (its kids' names in git's order) after
// the kid name, which was there if had, was removed and, unless child is
// nil, put back as child (a file or a folder sort apart): a file created,
// renamed or deleted costs a copy of the names, not a sort of them. kids
// is the folder's new kids.
func reordered(order []string, kids map[string]*node, name string, had bool, child *node) []string {
	out := make([]string, 0, len(order)+1)
	for _, n := range order {
		if !had || n != name {
			out = append(out, n)
		}
	}
	if child != nil {
		i, _ := slices.BinarySearchFunc(out, name, func(e, _ string) int {
			return gd.CompareNames(e, kids[e].isDir(), name, child.isDir())
		})
		out = slices.Insert(out, i, name)
	}
	return out
}

// treeFromIndex builds the tree from the index gitmem read at start, if
// its entries make exactly the tree treeHash (every tree is encoded and
// hashed to check): no tree object is read, and a file's size comes from
// its vouched lstat data (only the others are looked up). nil when the
// index does not match (git changed it, or there is none). Called with
// omu held.
func (r *Repo) treeFromIndex(treeHash plumbing.Hash) *node {
	if len(r.index) == 0 {
		return nil
	}
	type dir struct{ kids map[string]any } // *dir or *node
	root := &dir{kids: map[string]any{}}
	for _, e := range r.index {
		segs := split(e.Path)
		d := root
		for _, s := range segs[:len(segs)-1] {
			next, ok := d.kids[s].(*dir)
			if !ok {
				if _, clash := d.kids[s]; clash {
					return nil
				}
				next = &dir{kids: map[string]any{}}
				d.kids[s] = next
			}
			d = next
		}
		n := &node{mode: e.Mode, hash: e.Hash}
		if n.isFile() {
			if e.Stat.IsZero() {
				size, err := r.obj.Size(e.Hash)
				if err != nil {
					return nil
				}
				n.size = size
			} else {
				n.size = e.Stat.Size()
			}
		}
		d.kids[segs[len(segs)-1]] = n
	}
	var build func(d *dir) *node
	build = func(d *dir) *node {
		kids := make(map[string]*node, len(d.kids))
		for name, k := range d.kids {
			if sub, ok := k.(*dir); ok {
				kids[name] = build(sub)
			} else {
				kids[name] = k.(*node)
			}
		}
		n := newDir(kids)
		n.hash = plumbing.ComputeHash(plumbing.TreeObject, encodeTree(n))
		return n
	}
	if n := build(root); n.hash == treeHash {
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
	for _, name := range slices.Sorted(maps.Keys(n.kids)) {
		p := name
		if prefix != "" {
			p = prefix + "/" + name
		}
		walkFiles(n.kids[name], p, fn)
	}
}

// changedFiles calls fn for every path under prefix where a and b (trees
// or files, nil for absent) do not hold the same regular file: changed,
// added or removed, in either. Subtrees whose hashes match are skipped.
func changedFiles(a, b *node, prefix string, fn func(p string)) {
	if a == b || (a != nil && b != nil && a.mode == b.mode && !a.hash.IsZero() && a.hash == b.hash) {
		return
	}
	if a.isFile() || b.isFile() {
		fn(prefix)
	}
	var names []string
	for _, n := range []*node{a, b} {
		if n.isDir() {
			for name := range n.kids {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		var ka, kb *node
		if a.isDir() {
			ka = a.kids[name]
		}
		if b.isDir() {
			kb = b.kids[name]
		}
		changedFiles(ka, kb, join2(prefix, name), fn)
	}
}

// encodeTree is the git encoding of a folder whose children all have
// hashes: its entries in git's order, where a folder sorts as if its name
// ended in "/".
//
// A folder not yet published (being prepared) keeps the order it found in
// n.order, for the versions made from it.
func encodeTree(n *node) []byte {
	if n.order == nil || len(n.order) != len(n.kids) { // (the length: cheap insurance)
		entries := make([]object.TreeEntry, 0, len(n.kids))
		for name, k := range n.kids {
			entries = append(entries, object.TreeEntry{Name: name, Mode: k.mode})
		}
		gd.SortEntries(entries)
		n.order = make([]string, len(entries))
		for i, e := range entries {
			n.order[i] = e.Name
		}
	}
	size := 0
	for _, name := range n.order {
		size += gd.EntrySize(name)
	}
	b := make([]byte, 0, size)
	for _, name := range n.order {
		k := n.kids[name]
		b = gd.AppendEntry(b, name, k.mode, k.hash)
	}
	return b
}
