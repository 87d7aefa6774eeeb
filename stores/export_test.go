package stores

import "github.com/gitmem-dev/gitmem/gitmem"

// PackWith runs one round of the background packing, collecting each
// store with gc (the background's is r.GC(false)).
func (d *Dir) PackWith(gc func(r *gitmem.Repo) (gitmem.GCStats, error)) { d.packWith(gc) }
