package gitmem

import "context"

// IndexLag is how many commits on HEAD's first-parent line the history
// index file (.git/gitmem/history) does not hold yet, counted up to max
// (max when the index is further behind, or missing). gitmem appends to
// the index at each commit and catches it up when HEAD moved by other
// means; a lag that stays above zero while the server is idle means the
// index cannot be written. For metrics.
func (r *Repo) IndexLag(ctx context.Context, max int) (int, error) {
	head, err := r.Commit(ctx, "HEAD")
	if err != nil {
		return 0, err
	}
	tip := r.histIndex.fileTip().String()
	n := 0
	for c := head; c.Hash != tip && n < max; n++ {
		if len(c.Parents) == 0 {
			return max, nil // the whole history is missing from the file
		}
		if c, err = r.Commit(ctx, c.Parents[0]); err != nil {
			return 0, err
		}
	}
	return n, nil
}
