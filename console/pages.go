package console

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// home is the list of stores (with --stores), else the memory's files.
func (c *Console) home(w http.ResponseWriter, r *http.Request, v *visit) {
	if c.opt.Stores == nil {
		http.Redirect(w, r, base+"m/tree", http.StatusSeeOther)
		return
	}
	c.storeList(w, r, v)
}

type storeRow struct {
	Name, Title, Description string
	URL                      string
	Files                    int
	Size                     int64
	Last                     gitmem.Commit
	Archived                 bool
	Unreadable               bool
	// Problem is why an unreadable store cannot be read, in a word
	// (Kind) and as the APIs say it (stores.Problem).
	Kind, Problem string
}

type storesData struct {
	Query string
	Rows  []storeRow
	Next  string // the next page's address
}

const storesPerPage = 50

func (c *Console) storeList(w http.ResponseWriter, r *http.Request, v *visit) {
	q := strings.TrimSpace(r.FormValue("q"))
	lower := strings.ToLower(q)
	page, err := c.opt.Stores.List(stores.ListOptions{After: r.FormValue("after"), Limit: storesPerPage, IncludeArchived: true,
		Allow: v.token.Allows,
		Where: func(i stores.Info) bool {
			return lower == "" || strings.Contains(strings.ToLower(i.Name), lower) || strings.Contains(strings.ToLower(i.Title()), lower)
		}})
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	d := storesData{Query: q}
	for _, info := range page.Items {
		row := storeRow{Name: info.Name, Title: info.Title(), Description: info.Description, Archived: info.IsArchived(),
			URL: base + "s/" + pathEscape(info.Name) + "/"}
		err := info.Err
		if err == nil {
			row.Files, row.Size, row.Last, err = c.storeStats(info.Name)
		}
		if err != nil {
			row.Unreadable = true
			row.Kind, row.Problem = stores.Problem(info.Name, err)
		}
		d.Rows = append(d.Rows, row)
	}
	if page.Next != "" {
		d.Next = pageURL(base, "q", q, "after", page.Next)
	}
	c.render(w, v, http.StatusOK, "stores.html", "Stores", "stores", d)
}

// storeStats is a store's number of files, their size and its last
// commit; err when it cannot be opened or read.
func (c *Console) storeStats(name string) (files int, size int64, last gitmem.Commit, err error) {
	st, err := c.opt.Stores.Acquire(context.Background(), name)
	if err != nil {
		return 0, 0, last, err
	}
	defer st.Release()
	err = st.Use(func(repo *gitmem.Repo, _ stores.Meta) error {
		snap, err := repo.Snapshot(context.Background())
		if err != nil {
			return err
		}
		u := snap.Usage()
		files, size = u.Files, u.Bytes
		last, err = snap.HeadCommit()
		return err
	})
	return files, size, last, err
}

// memPath reads a memory path parameter (/memories/... as the model
// writes it; empty: the root).
func memPath(r *http.Request, name string) (string, error) {
	p := strings.TrimSpace(r.FormValue(name))
	if p == "" {
		return "", nil
	}
	return policy.ParsePath(p)
}

type crumb struct{ Name, URL string }

// crumbs are the folders above rel (and rel itself), each a link.
func crumbs(m *memRef, rel string) []crumb {
	out := []crumb{{"/memories", m.URL("tree")}}
	if rel == "" {
		return out
	}
	at := ""
	for _, seg := range strings.Split(rel, "/") {
		at = join(at, seg)
		out = append(out, crumb{seg, m.URL("tree", "path", policy.Display(at))})
	}
	return out
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

type treeData struct {
	Path    string
	Crumbs  []crumb
	Entries []operator.Entry
}

func (c *Console) tree(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	rel, err := memPath(r, "path")
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	entries, err := operator.ListFolder(r.Context(), repo, rel)
	if errors.Is(err, gitmem.ErrNotDir) {
		http.Redirect(w, r, v.mem.URL("file", "path", policy.Display(rel)), http.StatusSeeOther)
		return
	}
	if errors.Is(err, gitmem.ErrNotExist) {
		c.fail(w, r, v, http.StatusNotFound, "There is no folder "+policy.Display(rel)+" in this memory.")
		return
	}
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	c.render(w, v, http.StatusOK, "tree.html", policy.Display(rel), "files", treeData{Path: policy.Display(rel), Crumbs: crumbs(v.mem, rel), Entries: entries})
}

type line struct {
	N    int
	Text string
}

type fileData struct {
	Path   string
	Crumbs []crumb
	Memory operator.Memory
	Lines  []line
	Binary bool
}

// lines splits content into numbered lines (a last newline ends the
// last line; it does not start one).
func lines(content []byte) []line {
	text := strings.TrimSuffix(string(content), "\n")
	if len(content) == 0 {
		return nil
	}
	var out []line
	for i, l := range strings.Split(text, "\n") {
		out = append(out, line{i + 1, l})
	}
	return out
}

func (c *Console) file(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	rel, err := memPath(r, "path")
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	m, err := operator.GetMemory(r.Context(), repo, rel)
	if errors.Is(err, gitmem.ErrIsDir) || rel == "" {
		http.Redirect(w, r, v.mem.URL("tree", "path", policy.Display(rel)), http.StatusSeeOther)
		return
	}
	if errors.Is(err, gitmem.ErrNotExist) {
		c.fail(w, r, v, http.StatusNotFound, "There is no memory file "+policy.Display(rel)+".")
		return
	}
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	d := fileData{Path: policy.Display(rel), Crumbs: crumbs(v.mem, rel), Memory: m, Binary: strings.IndexByte(string(m.Content), 0) >= 0}
	if !d.Binary {
		d.Lines = lines(m.Content)
	}
	c.render(w, v, http.StatusOK, "file.html", d.Path, "files", d)
}

// entry is a change as a list shows it, with its diff.
type entry struct {
	gitmem.Commit
	Files []diffFile
}

type timelineData struct {
	Filter             map[string]string
	Follow             bool
	Entries            []entry
	Next, Live, Newest string
	Filtered, Writable bool
	Head               string
}

const changesPerPage = 20

// rowsPerChange bounds the diff rows a change shows in the timeline.
const rowsPerChange = 200

func (c *Console) timeline(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	f := map[string]string{}
	for _, k := range []string{"path", "agent", "session", "tool_use_id", "command", "since", "until"} {
		f[k] = strings.TrimSpace(r.FormValue(k))
	}
	opt := gitmem.LogOptions{ToolUseID: f["tool_use_id"], Session: f["session"], Agent: f["agent"], Command: f["command"],
		Follow: r.FormValue("follow") != ""}
	if f["path"] != "" {
		rel, err := policy.ParsePath(f["path"])
		if err != nil {
			c.failErr(w, r, v, err)
			return
		}
		opt.Paths = []string{rel}
	} else {
		opt.Follow = false
	}
	for _, k := range []string{"since", "until"} {
		if f[k] == "" {
			continue
		}
		t, perr := policy.ParseTime(f[k], c.opt.Now())
		if perr != nil {
			c.fail(w, r, v, http.StatusBadRequest, k+": "+perr.Error())
			return
		}
		if k == "since" {
			opt.Since = t
		} else {
			opt.Until = t
		}
	}
	snap, err := repo.Snapshot(r.Context())
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	after := r.FormValue("after")
	page, err := operator.Versions(r.Context(), repo, opt, after, changesPerPage)
	if errors.Is(err, operator.ErrBadCursor) {
		c.fail(w, r, v, http.StatusBadRequest, "That page of the timeline no longer exists (the history was rewritten since): start again from the newest.")
		return
	}
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	d := timelineData{Filter: f, Follow: opt.Follow, Head: snap.Head(), Writable: !v.token.ReadOnly() && !v.mem.Archived}
	for _, val := range f {
		d.Filtered = d.Filtered || val != ""
	}
	for _, cm := range page.Items {
		changes, err := operator.Changes(repo, cm, nil)
		if err != nil {
			c.failErr(w, r, v, err)
			return
		}
		d.Entries = append(d.Entries, entry{cm, diffFiles(changes, true, rowsPerChange)})
	}
	kv := []string{}
	for k, val := range f {
		kv = append(kv, k, val)
	}
	if opt.Follow {
		kv = append(kv, "follow", "1")
	}
	if page.Next != "" {
		d.Next = v.mem.URL("timeline", append(kv, "after", page.Next)...)
	}
	if after == "" {
		d.Live = v.mem.URL("events", "head", d.Head)
	} else {
		d.Newest = v.mem.URL("timeline", kv...)
	}
	c.render(w, v, http.StatusOK, "timeline.html", "Timeline", "timeline", d)
}

type changeData struct {
	Commit   gitmem.Commit
	Files    []diffFile
	Unified  bool
	Writable bool
	Done     string
}

// view says whether a diff is shown unified (the default) or side by
// side (view=split).
func view(r *http.Request) bool { return r.FormValue("view") != "split" }

func (c *Console) change(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	rev := strings.TrimSpace(r.FormValue("rev"))
	if rev == "" {
		c.fail(w, r, v, http.StatusBadRequest, "Name a change: its hash or its tool_use id.")
		return
	}
	cm, err := operator.Revision(r.Context(), repo, rev, c.opt.Now(), false)
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	changes, err := operator.Changes(repo, cm, nil)
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	d := changeData{Commit: cm, Files: diffFiles(changes, view(r), 0), Unified: view(r), Writable: !v.token.ReadOnly() && !v.mem.Archived,
		Done: doneNotice(r.FormValue("done"))}
	c.render(w, v, http.StatusOK, "change.html", cm.Subject, "timeline", d)
}

// doneNotice is what a page says after a repair sent the operator there.
func doneNotice(done string) string {
	switch done {
	case "revert":
		return "Reverted: this is the new commit."
	case "restore":
		return "Restored: this is the new commit."
	case "expire":
		return "Expired: this is the new commit (revert it to bring the files back)."
	}
	return ""
}

type diffData struct {
	From, To, Path string
	FromCommit     gitmem.Commit
	ToCommit       gitmem.Commit
	Files          []diffFile
	Unified        bool
	Asked          bool
}

func (c *Console) diff(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	d := diffData{From: strings.TrimSpace(r.FormValue("from")), To: strings.TrimSpace(r.FormValue("to")), Path: strings.TrimSpace(r.FormValue("path")), Unified: view(r)}
	if d.From == "" {
		c.render(w, v, http.StatusOK, "diff.html", "Diff", "diff", d)
		return
	}
	d.Asked = true
	to := d.To
	if to == "" {
		to = "HEAD"
	}
	var paths []string
	if d.Path != "" {
		rel, err := policy.ParsePath(d.Path)
		if err != nil {
			c.failErr(w, r, v, err)
			return
		}
		paths = []string{rel}
	}
	var err error
	if d.FromCommit, err = operator.Revision(r.Context(), repo, d.From, c.opt.Now(), true); err == nil {
		d.ToCommit, err = operator.Revision(r.Context(), repo, to, c.opt.Now(), true)
	}
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	changes, err := repo.Diff(d.FromCommit.Hash, d.ToCommit.Hash, paths...)
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	d.Files = diffFiles(changes, d.Unified, 0)
	c.render(w, v, http.StatusOK, "diff.html", "Diff", "diff", d)
}

type blameRow struct {
	gitmem.BlameLine
	First bool // the first line of a run the same change wrote
}

type blameData struct {
	Path   string
	Crumbs []crumb
	Rows   []blameRow
}

func (c *Console) blame(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	rel, err := memPath(r, "path")
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	ls, err := repo.Blame(r.Context(), rel)
	if errors.Is(err, gitmem.ErrNotExist) || rel == "" {
		c.fail(w, r, v, http.StatusNotFound, policy.Display(rel)+" is no memory file: blame takes a file.")
		return
	}
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	d := blameData{Path: policy.Display(rel), Crumbs: crumbs(v.mem, rel)}
	for i, l := range ls {
		d.Rows = append(d.Rows, blameRow{l, i == 0 || ls[i-1].Commit.Hash != l.Commit.Hash})
	}
	c.render(w, v, http.StatusOK, "blame.html", "Blame "+d.Path, "files", d)
}

type conflict struct{ Kind, Path string }

type merge struct {
	gitmem.Commit
	Conflicts []conflict
}

type sharedData struct {
	Remotes []gitmem.SyncStatus
	Errors  []string
	Merges  []merge
}

const mergesShown = 50

func (c *Console) shared(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	remotes, err := repo.Remotes()
	if err != nil {
		c.failErr(w, r, v, err)
		return
	}
	var d sharedData
	for _, rm := range remotes {
		st, err := repo.Status(r.Context(), rm.Name)
		if err != nil {
			d.Errors = append(d.Errors, rm.Name+": its state cannot be read")
			c.log.Error("console: remote status", "store", v.store, "remote", rm.Name, "err", err)
			continue
		}
		d.Remotes = append(d.Remotes, st)
	}
	err = repo.Log(r.Context(), gitmem.LogOptions{Conflicts: true, Limit: mergesShown}, nil, func(cm gitmem.Commit) error {
		m := merge{Commit: cm}
		for _, t := range cm.Trailers {
			if t.Key == gitmem.TrailerConflict {
				kind, path, _ := strings.Cut(t.Value, " ")
				m.Conflicts = append(m.Conflicts, conflict{kind, path})
			}
		}
		d.Merges = append(d.Merges, m)
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		c.failErr(w, r, v, err)
		return
	}
	c.render(w, v, http.StatusOK, "shared.html", "Shared memory", "shared", d)
}
