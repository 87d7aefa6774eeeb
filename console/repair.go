package console

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
)

// A repair is two requests: a preview (what exactly would change, with
// gitmem's dry run) and a confirmation, whose form carries the preview's
// digest (operator.ChangesSHA256): the repair is committed, under the
// writer lock, only if it still changes exactly that
// (operator.ExpectChanges), else the new preview is shown. A redaction
// rewrites history rather than adding a commit, and is previewed with
// what it rewrites and the remotes that keep the old history.

type repairForm struct {
	Rev, To, Path, Paths, OlderThan, Keep, Kind string
}

type repairPageData struct {
	Form      repairForm
	Writable  bool // revert, restore, expire: not read-only, not archived
	CanRedact bool
}

func (c *Console) repairPage(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	f := repairForm{Rev: r.FormValue("rev"), To: r.FormValue("to"), Path: r.FormValue("path"), Paths: r.FormValue("paths"),
		OlderThan: r.FormValue("older_than"), Kind: r.FormValue("kind")}
	d := repairPageData{Form: f, Writable: !v.token.ReadOnly() && !v.mem.Archived, CanRedact: !v.token.ReadOnly()}
	c.render(w, v, http.StatusOK, "repair.html", "Repair", "repair", d)
}

type field struct{ Name, Value string }

type remoteNote struct {
	Name, URL string
}

type previewData struct {
	Action     string
	Heading    string
	Summary    []string
	Notice     string
	Error      string
	Commits    []gitmem.Commit // the changes a revert undoes
	Conflicts  []gitmem.FileConflict
	Files      []diffFile
	Stale      []gitmem.Stale
	Rewritten  []gitmem.Rewrite
	Refs       []string
	Renamed    []string
	Removed    int
	Remotes    []remoteNote
	Confirm    []field // the confirmation form's fields, when it can be confirmed
	Retry      []field // a second try with a choice (theirs, delete)
	RetryLabel string
	Done       bool // a redaction made: its result
}

func (c *Console) repair(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo) {
	if v.token.ReadOnly() {
		c.fail(w, r, v, http.StatusForbidden, "Token "+v.token.Name+" is read-only: it can look but not change. Nothing was changed.")
		return
	}
	confirm := r.PostForm.Get("step") == "confirm"
	action := r.PathValue("action")
	if v.mem.Archived && action != "redact" {
		c.fail(w, r, v, http.StatusConflict, "The store is archived; unarchive it to change it. Nothing was changed.")
		return
	}
	var d previewData
	var status int
	switch action {
	case "revert":
		status = c.revert(w, r, v, repo, confirm, &d)
	case "restore":
		status = c.restore(w, r, v, repo, confirm, &d)
	case "expire":
		status = c.expire(w, r, v, repo, confirm, &d)
	case "redact":
		status = c.redact(r, v, repo, confirm, &d)
	default:
		c.fail(w, r, v, http.StatusNotFound, "There is no such repair.")
		return
	}
	if status == 0 { // answered (a redirect to the new commit)
		return
	}
	d.Action = action
	c.render(w, v, status, "preview.html", d.Heading, "repair", d)
}

// done sends the operator to the commit a repair made.
func done(w http.ResponseWriter, r *http.Request, v *visit, cm gitmem.Commit, action string) int {
	http.Redirect(w, r, v.mem.URL("change", "rev", cm.Hash, "done", action), http.StatusSeeOther)
	return 0
}

// failed puts an error in the preview and returns its status; a failure
// of the store is logged, and worded without its cause.
func (c *Console) failed(r *http.Request, v *visit, d *previewData, err error) int {
	status, msg := explain(v.store, err)
	if status == http.StatusInternalServerError {
		c.log.Error("console: store failure", "store", v.store, "path", r.URL.Path, "err", err.Error())
	}
	d.Error = msg
	return status
}

// outdated is the notice of a confirmation refused because the memory
// changed since its preview; the new preview follows it.
const outdated = "The memory changed since the preview (another operator, or an agent), so nothing was changed. This is what the repair would do now: look again, then confirm."

func (c *Console) revert(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo, confirm bool, d *previewData) int {
	revs := strings.Fields(r.PostForm.Get("rev"))
	theirs := r.PostForm.Get("strategy") == "theirs"
	d.Heading = "Revert " + strings.Join(revs, ", ")
	if len(revs) == 0 {
		d.Error = "Name the change to revert: its hash or its tool_use id."
		return http.StatusBadRequest
	}
	var names []string
	for _, rev := range revs {
		cm, err := operator.Revision(r.Context(), repo, rev, c.opt.Now(), false)
		if err != nil {
			return c.failed(r, v, d, err)
		}
		d.Commits = append(d.Commits, cm)
		name := cm.Trailer(gitmem.TrailerToolUseID)
		if name == "" {
			name = cm.Hash[:7]
		}
		names = append(names, name)
	}
	d.Heading = "Revert " + strings.Join(names, ", ")
	opt := gitmem.RevertOptions{Theirs: theirs}
	if confirm {
		opt.Author, opt.Check = v.author(), operator.ExpectChanges(r.PostForm.Get("expect"))
		cm, _, err := repo.Revert(r.Context(), revs, opt)
		if err == nil {
			return done(w, r, v, cm, "revert")
		}
		// A conflict now, where the preview had none, is a change since.
		var ce *gitmem.ConflictError
		if !errors.Is(err, operator.ErrPreviewChanged) && !errors.As(err, &ce) {
			return c.failed(r, v, d, err)
		}
		d.Notice, opt.Author, opt.Check = outdated, gitmem.Signature{}, nil
	}
	opt.DryRun = true
	_, changes, err := repo.Revert(r.Context(), revs, opt)
	var ce *gitmem.ConflictError
	if errors.As(err, &ce) {
		d.Conflicts = ce.Files
		d.Error = fmt.Sprintf("Later edits overlap what this change did in %d file(s): reverting would lose them, so it is refused as it is. Nothing was changed.", ce.NumFiles())
		d.Retry, d.RetryLabel = []field{{"rev", strings.Join(revs, " ")}, {"strategy", "theirs"}}, "Preview the forced undo (where edits overlap, the version before the change wins)"
		return http.StatusConflict
	}
	if err != nil {
		return c.failed(r, v, d, err)
	}
	d.Summary = append(d.Summary, fmt.Sprintf("One new commit, by %s, undoes it in %d file(s); the change itself stays in the history.", authorName(v), len(changes)))
	if theirs {
		d.Summary = append(d.Summary, "Forced: where later edits overlap, the version before the change wins.")
	}
	d.Files = diffFiles(changes, true, 0)
	d.Confirm = []field{{"rev", strings.Join(revs, " ")}, {"expect", operator.ChangesSHA256(changes)}}
	if theirs {
		d.Confirm = append(d.Confirm, field{"strategy", "theirs"})
	}
	return http.StatusOK
}

// authorName is who a repair's commit names.
func authorName(v *visit) string {
	if v.token.Name == "" {
		return "the operator"
	}
	return v.token.Name
}

// pathLines reads memory paths given one a line.
func pathLines(s string) ([]string, error) {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		rel, err := policy.ParsePath(l)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

func (c *Console) restore(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo, confirm bool, d *previewData) int {
	to := strings.TrimSpace(r.PostForm.Get("to"))
	del := r.PostForm.Get("delete") != ""
	d.Heading = "Restore to " + to
	paths, err := pathLines(r.PostForm.Get("paths"))
	if err != nil {
		return c.failed(r, v, d, err)
	}
	if to == "" {
		d.Error = "Say when to restore to: a time (2h, yesterday, 2026-11-20 15:04), a change's hash or its tool_use id."
		return http.StatusBadRequest
	}
	target, err := operator.Revision(r.Context(), repo, to, c.opt.Now(), true)
	if err != nil {
		return c.failed(r, v, d, err)
	}
	opt := gitmem.RestoreOptions{Paths: paths, Delete: del}
	if confirm {
		opt.Author, opt.Check = v.author(), operator.ExpectChanges(r.PostForm.Get("expect"))
		cm, _, err := repo.Restore(r.Context(), target, opt)
		if err == nil {
			return done(w, r, v, cm, "restore")
		}
		if !errors.Is(err, operator.ErrPreviewChanged) {
			return c.failed(r, v, d, err)
		}
		d.Notice, opt.Author, opt.Check = outdated, gitmem.Signature{}, nil
	}
	opt.DryRun = true
	_, changes, err := repo.Restore(r.Context(), target, opt)
	what := "the whole memory"
	if len(paths) > 0 {
		what = strings.Join(displayAll(paths), ", ")
	}
	d.Heading = "Restore " + what + " to " + target.Hash[:7]
	fields := []field{{"to", target.Hash}, {"paths", strings.Join(displayAll(paths), "\n")}}
	var ae *gitmem.AbsentError
	if errors.As(err, &ae) {
		d.Error = "Restoring would delete " + strings.Join(displayAll(ae.Paths), ", ") + ", which did not exist then; so it is refused as it is. Nothing was changed."
		d.Retry, d.RetryLabel = append(fields, field{"delete", "1"}), "Preview the restore that deletes them"
		return http.StatusConflict
	}
	if err != nil {
		return c.failed(r, v, d, err)
	}
	d.Summary = []string{fmt.Sprintf("%s as it was at %s (%s, %s): one new commit by %s, changing %d file(s). The history is kept.",
		what, target.Hash[:7], target.Time.Format(operator.TimeLayout), target.Subject, authorName(v), len(changes))}
	d.Files = diffFiles(changes, true, 0)
	d.Confirm = append(fields, field{"expect", operator.ChangesSHA256(changes)})
	if del {
		d.Confirm = append(d.Confirm, field{"delete", "1"})
	}
	return http.StatusOK
}

// keepGlobs reads globs of paths to keep, one a line, written from
// /memories or from memories/ (as the CLI's --keep).
func keepGlobs(s string) ([]string, error) {
	var out []string
	for _, g := range strings.Split(s, "\n") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		g = strings.TrimPrefix(strings.TrimPrefix(g, "/"), "memories/")
		if err := policy.CheckGlob(g); err != nil {
			return nil, &policy.PathError{Msg: "a glob to keep: " + err.Error()}
		}
		out = append(out, g)
	}
	return out, nil
}

func (c *Console) expire(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo, confirm bool, d *previewData) int {
	d.Heading = "Expire stale files"
	keep, err := keepGlobs(r.PostForm.Get("keep"))
	if err != nil {
		return c.failed(r, v, d, err)
	}
	var cutoff time.Time
	if confirm {
		cutoff, err = time.Parse(time.RFC3339, r.PostForm.Get("cutoff"))
	} else {
		var age time.Duration
		if age, err = policy.ParseDuration(r.PostForm.Get("older_than")); err == nil {
			cutoff = c.opt.Now().Add(-age).Truncate(time.Second)
		}
	}
	if err != nil {
		d.Error = "Say how long a file must have gone unchanged: 90d, 2w, 12h."
		return http.StatusBadRequest
	}
	if confirm {
		stale, cm, err := repo.Expire(r.Context(), cutoff, gitmem.ExpireOptions{Keep: keep, Author: v.author(), Check: operator.ExpectChanges(r.PostForm.Get("expect"))})
		switch {
		case err == nil && len(stale) > 0:
			return done(w, r, v, cm, "expire")
		case err == nil:
		case errors.Is(err, operator.ErrPreviewChanged):
			d.Notice = outdated
		default:
			return c.failed(r, v, d, err)
		}
	}
	stale, changes, err := operator.ExpirePreview(r.Context(), repo, cutoff, keep)
	if err != nil {
		return c.failed(r, v, d, err)
	}
	d.Heading = "Expire files unchanged since " + cutoff.Format(operator.TimeLayout)
	if len(stale) == 0 {
		d.Error = "No file has gone unchanged since " + cutoff.Format(operator.TimeLayout) + ": nothing to expire."
		return http.StatusOK
	}
	d.Summary = []string{fmt.Sprintf("One new commit by %s deletes %d file(s); reverting it brings them back.", authorName(v), len(stale))}
	d.Stale = stale
	d.Confirm = []field{{"cutoff", cutoff.Format(time.RFC3339)}, {"keep", strings.Join(keep, "\n")}, {"expect", operator.ChangesSHA256(changes)}}
	return http.StatusOK
}

func (c *Console) redact(r *http.Request, v *visit, repo *gitmem.Repo, confirm bool, d *previewData) int {
	red, fields, status := c.redactionAsked(r, v, d)
	if status != 0 {
		return status
	}
	rs, err := repo.Remotes()
	if err != nil {
		return c.failed(r, v, d, err)
	}
	// push: the remote the confirmation rewrites too ("" none), as
	// gitmem redact --push.
	push := r.PostForm.Get("push")
	if confirm && push != "" && !slices.ContainsFunc(rs, func(rm gitmem.Remote) bool { return rm.Name == push }) {
		d.Error = "There is no remote " + push + ". Nothing was changed."
		return http.StatusBadRequest
	}
	var rep gitmem.RedactReport
	var res gitmem.SyncResult
	if confirm && push != "" {
		rep, res, err = repo.RedactShared(r.Context(), push, red, c.opt.Sync, nil)
	} else {
		rep, err = repo.Redact(r.Context(), red, !confirm, nil)
	}
	if err != nil {
		return c.redactFailed(r, v, d, push, err)
	}
	for _, rm := range rs {
		d.Remotes = append(d.Remotes, remoteNote{rm.Name, rm.URL})
	}
	describeRedaction(d, rep, res, confirm, push, fields)
	return http.StatusOK
}

// redactionAsked reads the redaction the form asks for (text, a file or
// a blob), sets the page's heading, and returns the form's fields a
// confirmation repeats; status is the page's when the form is wrong (0:
// it is right).
func (c *Console) redactionAsked(r *http.Request, v *visit, d *previewData) (red gitmem.Redaction, fields []field, status int) {
	kind := r.PostForm.Get("kind")
	text, path, blob := r.PostForm.Get("text"), strings.TrimSpace(r.PostForm.Get("path")), strings.TrimSpace(r.PostForm.Get("blob"))
	regex := r.PostForm.Get("regex") != ""
	fields = []field{{"kind", kind}}
	var rel *string
	match := ""
	switch kind {
	case "text":
		d.Heading = "Redact text from all history"
		match = text
		if !regex {
			match = regexp.QuoteMeta(text)
		}
		fields = append(fields, field{"text", text})
		if regex {
			fields = append(fields, field{"regex", "1"})
		}
	case "path":
		d.Heading = "Redact " + path + " from all history"
		p, err := policy.ParsePath(path)
		if err != nil {
			return red, nil, c.failed(r, v, d, err)
		}
		rel = &p
		fields = append(fields, field{"path", path})
	case "blob":
		d.Heading = "Redact blob " + blob + " from all history"
		fields = append(fields, field{"blob", blob})
	default:
		d.Heading = "Redact"
		d.Error = "Say what to redact: text, a file or a blob."
		return red, nil, http.StatusBadRequest
	}
	if kind != "blob" {
		blob = ""
	}
	red, err := operator.ParseRedaction(rel, blob, match)
	if err != nil {
		return red, nil, c.failed(r, v, d, err)
	}
	return red, fields, 0
}

// redactFailed says on the page why a redaction (with the remote push:
// "" none) failed, and returns the page's status.
func (c *Console) redactFailed(r *http.Request, v *visit, d *previewData, push string, err error) int {
	var re *gitmem.RemoteError
	switch {
	case errors.As(err, &re):
		d.Error = fmt.Sprintf("%s %s failed: %v. See the Shared page for this memory's state.", re.Op, re.Remote, re.Err)
		return http.StatusBadGateway
	case push != "" && !errors.Is(err, gitmem.ErrPatternHoldsSecret):
		c.log.Error("console: redact --push", "store", v.store, "remote", push, "err", err.Error())
		d.Error = "The redaction with " + push + " failed (the server's log says why). See the Shared page for this memory's state."
		return http.StatusBadGateway
	}
	return c.failed(r, v, d, err)
}

// describeRedaction puts on the page what the redaction did (confirm) or
// would do, and, for a preview, the fields its confirmation repeats.
func describeRedaction(d *previewData, rep gitmem.RedactReport, res gitmem.SyncResult, confirm bool, push string, fields []field) {
	d.Rewritten, d.Refs, d.Renamed, d.Removed, d.Done = rep.Rewritten, rep.Refs, rep.Renamed, len(rep.Removed), confirm
	switch {
	case len(rep.Rewritten) == 0:
		d.Error = "No commit holds it: nothing to redact."
		d.Remotes = nil
	case confirm && push != "":
		d.Summary = []string{fmt.Sprintf("Redacted: %d commit(s) rewritten, %d object(s) deleted. Commits keep their messages, trailers, authors and dates; their hashes changed.", len(rep.Rewritten), len(rep.Removed)),
			fmt.Sprintf("Replaced %s's history (%d commit(s) sent) and recorded the redaction: every other clone applies it at its next sync.", push, res.Pushed)}
		d.Remotes = nil
	case confirm:
		d.Summary = []string{fmt.Sprintf("Redacted: %d commit(s) rewritten, %d object(s) deleted. Commits keep their messages, trailers, authors and dates; their hashes changed.", len(rep.Rewritten), len(rep.Removed))}
	default:
		d.Summary = []string{fmt.Sprintf("%d commit(s) would be rewritten, from the first that holds it; every object that held it is then deleted. This cannot be undone.", len(rep.Rewritten))}
		d.Confirm = fields
	}
}
