package stores

import "github.com/gitmem-dev/gitmem/gitmem"

// PackWith runs one round of the background packing, collecting each
// store with gc (the background's is r.GC(false)).
func (d *Dir) PackWith(gc func(r *gitmem.Repo) (gitmem.GCStats, error)) { d.packWith(gc) }

// OnStep has step told of the steps of a delete ("delete: closed": the
// repository closed, its folder in place; "delete: renamed": the folder
// renamed away, not yet removed), of a create ("create: initialised":
// a gitmem repository, not yet a store, not yet in place), and of a call that waits for a
// delete of its store to end ("waits for a delete") or for a create or
// delete of its name ("waits for the name"), and of a metadata change
// begun, not yet committed ("metadata change: begun": where another
// process's change may come between). Set before the Dir is used.
func (d *Dir) OnStep(step func(string)) { d.step = step }

// OpenErr is how a failure to open the store name's repository is worded.
func (d *Dir) OpenErr(name string, err error) error { return d.openErr(name, err) }

// CommitsDecoded is the number of commits the store's metadata reads
// (Use's, ArchivedAt's) decoded from its objects since it was opened.
func (s *Store) CommitsDecoded() int64 { return s.e.seen.decoded.Load() }
