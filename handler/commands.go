package handler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

func notExist(path string) error {
	return fail("The path %s does not exist. Please provide a valid path.", path)
}

// view shows a folder (two levels deep) or a file with line numbers.
func (h *Handler) view(in input) (string, error) {
	path, rel, err := in.path("path")
	if err != nil {
		return "", err
	}
	from, to, ranged := 0, 0, false
	if raw, ok := in.fields["view_range"]; ok && string(raw) != "null" {
		var r []int
		if err := jsonInts(raw, &r); err != nil || len(r) != 2 {
			return "", fail("Parameter \"view_range\" must be an array of two integers, [start_line, end_line]")
		}
		from, to, ranged = r[0], r[1], true
	}
	if h.clean != nil && !ranged {
		if info, err := h.clean.Stat(rel); err == nil && info.Dir {
			return h.listing(h.clean, path, rel, info)
		}
	}
	if h.repo == nil {
		return "", errNoRepo // a server that gave View gave it for this call's folder (ViewedPath)
	}
	snap, err := h.repo.Snapshot(in.ctx, rel) // a hand edit to the file is committed first
	if err != nil {
		return "", cancelled(err)
	}
	info, err := snap.Stat(rel)
	if errors.Is(err, gitmem.ErrNotExist) {
		return "", notExist(path)
	}
	if err != nil {
		return "", err
	}
	if info.Dir {
		return h.listing(snap, path, rel, info)
	}
	data, err := snap.ReadFile(rel)
	if err != nil {
		return "", err
	}
	lines := policy.SplitLines(string(data))
	if len(lines) > policy.MaxLines {
		return "", fail("File %s exceeds maximum line limit of 999,999 lines.", path)
	}
	a, b := 0, len(lines)
	if ranged {
		a, b = policy.ViewRange(from, to, len(lines))
	}
	header := fmt.Sprintf("Here's the content of %s with line numbers:", path)
	return policy.Page(header, lines, a, b, h.limits.MaxViewBytes), nil
}

// listing renders a folder and what lies up to two levels below it,
// skipping hidden names and node_modules, sorted by name, depth first.
func (h *Handler) listing(snap *gitmem.View, path, rel string, info gitmem.Info) (string, error) {
	lines := []string{policy.HumanSize(info.Size) + "\t" + path}
	var walk func(rel, shown string, depth int) error
	walk = func(rel, shown string, depth int) error {
		kids, err := snap.List(rel)
		if err != nil {
			return err
		}
		slices.SortFunc(kids, func(a, b gitmem.Info) int {
			switch {
			case policy.Less(a.Name, b.Name):
				return -1
			case policy.Less(b.Name, a.Name):
				return 1
			}
			return 0
		})
		for _, k := range kids {
			if strings.HasPrefix(k.Name, ".") || k.Name == "node_modules" {
				continue
			}
			p := shown + "/" + k.Name
			if !k.Dir {
				lines = append(lines, policy.HumanSize(k.Size)+"\t"+p)
				continue
			}
			lines = append(lines, policy.HumanSize(k.Size)+"\t"+p+"/")
			if depth < 2 {
				if err := walk(join(rel, k.Name), p, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(rel, policy.Display(rel), 1); err != nil {
		return "", err
	}
	header := fmt.Sprintf("Here're the files and directories up to 2 levels deep in %s, excluding hidden items and node_modules:", path)
	return policy.PageListing(header, lines, h.limits.MaxViewBytes), nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// commitMeta is the commit a command becomes.
func (h *Handler) commitMeta(c Caller, id, command, path, newPath string, extra ...gitmem.Trailer) gitmem.Meta {
	subject := "memory: " + command + " " + path
	if newPath != "" {
		subject += " -> " + newPath
	}
	m := gitmem.Meta{Subject: subject, Author: h.author, Trailers: []gitmem.Trailer{
		{Key: gitmem.TrailerToolUseID, Value: id},
		{Key: gitmem.TrailerCommand, Value: command},
		{Key: gitmem.TrailerPath, Value: path},
	}}
	if newPath != "" {
		m.Trailers = append(m.Trailers, gitmem.Trailer{Key: gitmem.TrailerNewPath, Value: newPath})
	}
	m.Trailers = append(m.Trailers, extra...)
	// The caller's names come from headers and flags: bounded and made
	// safe for a commit (policy.CommitText) before they reach one.
	if session := policy.CommitText(c.Session, policy.MaxCallerBytes); session != "" {
		m.Trailers = append(m.Trailers, gitmem.Trailer{Key: gitmem.TrailerSession, Value: session})
	}
	if agent := policy.CommitText(c.Agent, policy.MaxCallerBytes); agent != "" {
		m.Trailers = append(m.Trailers, gitmem.Trailer{Key: gitmem.TrailerAgent, Value: agent})
		// Its own identity, as a token's under serve --stores, made from
		// the name as given: cleaned first, then cut (policy.AgentIdent).
		// Made from the trailer's value, cut before its '<' and '>' were
		// dropped, it was shorter than the limit and ended "…" for a name
		// that fits once cleaned.
		m.Author = gitmem.SignatureOf(c.Agent)
	}
	if c.Author.Name != "" {
		m.Author = c.Author
	}
	return m
}

// TrailerMasked records a secret that was masked before a write: the rule
// and the line of the file that holds the placeholder.
const TrailerMasked = "Memory-Masked"

// screened is text the model is writing, checked for secrets.
type screened struct {
	text     string
	findings []policy.Finding // in text alone
}

// screen finds the secrets in text written to rel. It runs before the
// writer lock is taken; place finishes the screening in the file.
func (h *Handler) screen(rel, text string) screened {
	if h.screening == policy.ScreenOff {
		return screened{text: text}
	}
	return screened{text: text, findings: h.secrets.Find(rel, text)}
}

// screenedRefusal is the refusal of a secret (refuse mode) at line of path.
func screenedRefusal(f policy.Finding, path string) error {
	return fail("The content holds what looks like a secret (%s) on line %d of %s; nothing was written. "+
		"Keep secrets out of memory: note where a secret is kept, not its value", f.Rule, f.Line, path)
}

// place puts the screened text between before and after — the file's
// own text either side of where it goes — and screens the file that
// results where the text meets it: a secret the text completes with the
// file's text, or whose pieces an edit that removes text joins, counts as
// much as one written whole (policy.FindEdit). Refuse mode fails on the
// first secret, naming its line in the file; mask mode masks each secret
// whole and records it in a trailer of tx (nil: none, for madeBy). It
// returns the file to write and where the text begins in it.
func (h *Handler) place(sc screened, rel, path, before, after string, tx *gitmem.Tx) (string, int, error) {
	file, start := before+sc.text+after, len(before)
	if h.screening == policy.ScreenOff {
		return file, start, nil
	}
	fs := h.secrets.FindEdit(rel, file, start, start+len(sc.text), sc.findings)
	if len(fs) == 0 {
		return file, start, nil
	}
	if h.screening == policy.ScreenRefuse {
		return "", 0, screenedRefusal(fs[0], path)
	}
	masked, lines := policy.MaskSecrets(file, fs)
	for i, f := range fs {
		if tx != nil {
			tx.AddTrailer(TrailerMasked, fmt.Sprintf("%s line %d", f.Rule, lines[i]))
		}
	}
	// Where the text begins once the secrets before it are masked (at the
	// placeholder, when one holds the beginning).
	shift := 0
	for _, f := range fs {
		if f.Start >= start {
			break
		}
		if f.End > start {
			return masked, f.Start - shift, nil
		}
		shift += f.End - f.Start - len(f.Mask())
	}
	return masked, start - shift, nil
}

// trimNewline is the text without one final newline (insert writes its
// text as lines), its findings cut to it.
func (sc screened) trimNewline() screened {
	t := strings.TrimSuffix(sc.text, "\n")
	out := screened{text: t}
	for _, f := range sc.findings {
		if f.Start < len(t) {
			f.End = min(f.End, len(t))
			out.findings = append(out.findings, f)
		}
	}
	return out
}

// screenPath refuses a new name (a file or folder created or renamed to)
// that holds what looks like a secret, in refuse and mask mode alike: a
// name cannot be masked, the model refers to it. It runs before the
// writer lock is taken.
func (h *Handler) screenPath(rel string) error {
	if h.screening == policy.ScreenOff {
		return nil
	}
	if fs := h.secrets.Find(rel, rel); len(fs) > 0 {
		return fail("The path holds what looks like a secret (%s); nothing was written. "+
			"Keep secrets out of memory: note where a secret is kept, not its value", fs[0].Rule)
	}
	return nil
}

// maskNote tells the model which secrets a commit masked (from its
// Memory-Masked trailers), appended to the command's result.
func maskNote(trailers []gitmem.Trailer) string {
	var parts []string
	for _, t := range trailers {
		if rule, line, ok := strings.Cut(t.Value, " line "); ok && t.Key == TrailerMasked {
			parts = append(parts, "line "+line+" [REDACTED:"+rule+"]")
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: " + strings.Join(parts, ", ")
}

// update commits the change fn makes and returns fn's result. A tool_use
// id that already has a commit is not applied again: replay renders the
// original result from that commit. made tells the commits of an id
// apart when several have the call's command and paths (retried); nil:
// command and paths decide (delete, rename).
func (h *Handler) update(in input, meta gitmem.Meta, fn func(tx *gitmem.Tx) (string, error), replay func(gitmem.Commit) (string, error), made func(gitmem.Commit) (bool, error)) (string, error) {
	var result string
	start := time.Now()
	// The call's context stops the wait for the writer lock (another
	// process's gc, say) and is checked once more after fn: what fn did
	// is committed once the store has prepared it.
	commit, err := h.repo.Update(in.ctx, meta, func(tx *gitmem.Tx) error {
		if h.archivedAt != nil { // archived since the call began?
			archived, err := h.archivedAt(tx.Head())
			if err != nil {
				return err
			}
			if archived {
				return archivedError(in.command)
			}
		}
		var err error
		result, err = fn(tx)
		return err
	})
	err = cancelled(err)
	if err == nil {
		in.call.Commit, in.call.CommitDuration = commit.Hash, time.Since(start)
	}
	var applied *gitmem.AppliedError
	if errors.As(err, &applied) {
		c, err := h.retried(in.ctx, applied, meta, made)
		if err != nil {
			return "", err
		}
		in.call.Commit, in.call.Replayed = c.Hash, true
		result, err := replay(c)
		return result + maskNote(c.Trailers), err
	}
	return result + maskNote(commit.Trailers), err
}

// retried is the commit a retried call made. The id has one commit as a
// rule, and the call is its retry if its command and paths are the
// call's. Two agents that each made a call with the id, their histories
// then merged by a pull or sync, gave it two: the retry's is the one of
// the call's command and paths, and if both have them, the one whose
// change is what the call does to its parent's version (made). The
// store's commit is checked first; the id's others (Log by tool_use id)
// only when it is not the call's by command, paths or change. None: the
// id was used for another command.
func (h *Handler) retried(ctx context.Context, applied *gitmem.AppliedError, meta gitmem.Meta, made func(gitmem.Commit) (bool, error)) (gitmem.Commit, error) {
	same := func(c gitmem.Commit) bool {
		for _, key := range []string{gitmem.TrailerCommand, gitmem.TrailerPath, gitmem.TrailerNewPath} {
			if c.Trailer(key) != meta.Trailer(key) {
				return false
			}
		}
		return true
	}
	mine := func(c gitmem.Commit) (bool, error) {
		if !same(c) || made == nil {
			return same(c), nil
		}
		return made(c)
	}
	if ok, err := mine(applied.Commit); ok || err != nil {
		return applied.Commit, err
	}
	var alike []string // the id's commits of the call's command and paths
	if same(applied.Commit) {
		alike = append(alike, applied.Commit.Hash)
	}
	var twin string
	err := h.repo.Log(ctx, gitmem.LogOptions{ToolUseID: applied.ID}, nil, func(c gitmem.Commit) error {
		if c.Hash == applied.Commit.Hash || !same(c) {
			return nil
		}
		alike = append(alike, c.Hash)
		ok, err := mine(c)
		if ok {
			twin = c.Hash
			return errFound
		}
		return err
	})
	switch {
	case err != nil && !errors.Is(err, errFound):
		return gitmem.Commit{}, err
	case twin != "":
		return h.repo.Commit(ctx, twin)
	case len(alike) == 1: // the only commit of its command and paths: the call's, whatever its change
		return h.repo.Commit(ctx, alike[0])
	}
	return gitmem.Commit{}, fail("tool_use id %s was already used for another command (%s); nothing was changed",
		applied.ID, applied.Commit.Subject)
}

// madeBy is update's made for a call that writes the screened text sc to
// the file rel: whether commit c turned the file of c's first parent into
// what the call writes of it. edit gets the parent's text (exists false:
// it has no such file) and returns the file's text either side of where
// the call puts sc, or false where the call fails. The call's file is
// the one place makes (its secrets masked in mask mode), or the
// unscreened one: the commit may have been made with another
// --secret-screening.
func (h *Handler) madeBy(ctx context.Context, rel string, sc screened, edit func(old string, exists bool) (before, after string, ok bool)) func(gitmem.Commit) (bool, error) {
	return func(c gitmem.Commit) (bool, error) {
		var old []byte
		err := gitmem.ErrNotExist
		if len(c.Parents) > 0 {
			old, err = h.repo.ReadFileAt(ctx, c.Parents[0], rel)
		}
		if err != nil && !errors.Is(err, gitmem.ErrNotExist) {
			return false, err
		}
		before, after, ok := edit(string(old), err == nil)
		if !ok {
			return false, nil
		}
		got, err := h.repo.ReadFileAt(ctx, c.Hash, rel)
		if errors.Is(err, gitmem.ErrNotExist) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		if string(got) == before+sc.text+after {
			return true, nil
		}
		placed, _, err := h.place(sc, rel, "", before, after, nil)
		return err == nil && string(got) == placed, nil
	}
}

// errFound ends a walk of the history that found what it looked for.
var errFound = errors.New("found")

// cancelled says that a call its client cancelled (or whose deadline
// passed) changed nothing: the store gave up before its commit point.
func cancelled(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fail("The call was cancelled before its change was saved; nothing was changed")
	}
	return err
}

// checkWrite applies the size and count limits to writing size bytes at rel.
func (h *Handler) checkWrite(tx *gitmem.Tx, path, rel string, size int) error {
	var old int64 = -1
	if info, err := tx.Stat(rel); err == nil && !info.Dir {
		old = info.Size
	}
	u := tx.Usage()
	return h.limits.Check(path, policy.Usage{Files: u.Files, Bytes: u.Bytes}, old, int64(size))
}

func (h *Handler) create(c Caller, id string, in input) (string, error) {
	path, rel, err := in.path("path")
	if err != nil {
		return "", err
	}
	text, err := in.str("file_text")
	if err != nil {
		return "", err
	}
	if err := h.screenPath(rel); err != nil {
		return "", err
	}
	done := fmt.Sprintf("File created successfully at: %s", path)
	meta := h.commitMeta(c, id, "create", policy.Display(rel), "")
	sc := h.screen(rel, text)
	return h.update(in, meta, func(tx *gitmem.Tx) (string, error) {
		if _, err := tx.Stat(rel); err == nil {
			return "", fail("File %s already exists", path)
		}
		// A file made by hand there that no commit holds (left for want
		// of room, over the size limit): the worktree's follow would
		// write the model's over it. It exists, on disk.
		if made, err := tx.HandMade(rel); err != nil {
			return "", parentErr(err, "create "+path)
		} else if made {
			return "", fail("File %s already exists", path)
		}
		file, _, err := h.place(sc, rel, path, "", "", tx)
		if err != nil {
			return "", err
		}
		if err := h.checkWrite(tx, path, rel, len(file)); err != nil {
			return "", err
		}
		return done, parentErr(tx.WriteFile(rel, []byte(file)), "create "+path)
	}, func(gitmem.Commit) (string, error) { return done, nil },
		h.madeBy(in.ctx, rel, sc, func(_ string, exists bool) (string, string, bool) { return "", "", !exists }))
}

// parentErr explains a path whose parent is a file.
func parentErr(err error, what string) error {
	if errors.Is(err, gitmem.ErrNotDir) {
		return fail("Cannot %s: one of its parent folders is a file", what)
	}
	return err
}

// occurrences returns the byte offsets of every occurrence of sub in s,
// overlapping ones included: "aa" occurs twice in "aaa", so it is not a
// unique anchor for an edit.
func occurrences(s, sub string) []int {
	// Knuth-Morris-Pratt: linear in len(s)+len(sub) however the two
	// overlap (strings.Index from each match on is quadratic when they do:
	// a long run of one character searched for a long run of it).
	fail := make([]int, len(sub))
	for i, k := 1, 0; i < len(sub); i++ {
		for k > 0 && sub[i] != sub[k] {
			k = fail[k-1]
		}
		if sub[i] == sub[k] {
			k++
		}
		fail[i] = k
	}
	var out []int
	for i, k := 0, 0; i < len(s); i++ {
		for k > 0 && s[i] != sub[k] {
			k = fail[k-1]
		}
		if s[i] == sub[k] {
			k++
		}
		if k == len(sub) {
			out = append(out, i-k+1)
			k = fail[k-1]
		}
	}
	return out
}

func lineOf(s string, offset int) int { return strings.Count(s[:offset], "\n") + 1 }

// linesOf returns the lines (1-based, each once, ascending) on which the
// ascending offsets fall, counting newlines in one pass.
func linesOf(s string, offsets []int) []int {
	var lines []int
	line, pos := 1, 0
	for _, off := range offsets {
		line += strings.Count(s[pos:off], "\n")
		pos = off
		if len(lines) == 0 || lines[len(lines)-1] != line {
			lines = append(lines, line)
		}
	}
	return lines
}

// snippet is the str_replace result: the edited line and two lines either
// side, numbered, from the new content.
func snippet(content string, line int) string {
	lines := policy.SplitLines(content)
	start := max(0, line-1-2)
	end := min(len(lines), line-1+3)
	var b strings.Builder
	b.WriteString("The memory file has been edited. Here is the snippet showing the change (with line numbers):")
	for i := start; i < end; i++ {
		b.WriteString("\n" + policy.NumberLine(i+1, lines[i]))
	}
	return b.String()
}

func (h *Handler) strReplace(c Caller, id string, in input) (string, error) {
	path, rel, err := in.path("path")
	if err != nil {
		return "", err
	}
	oldStr, err := in.str("old_str")
	if err != nil {
		return "", err
	}
	newStr, err := in.str("new_str")
	if err != nil {
		return "", err
	}
	if oldStr == "" {
		return "", fail("Parameter \"old_str\" must not be empty: give the exact text to replace")
	}
	// Memory-Line is known once the file is read; SetTrailer fills it in.
	meta := h.commitMeta(c, id, "str_replace", policy.Display(rel), "", gitmem.Trailer{Key: gitmem.TrailerLine})
	sc := h.screen(rel, newStr)
	return h.update(in, meta, func(tx *gitmem.Tx) (string, error) {
		data, err := tx.ReadFile(rel)
		if errors.Is(err, gitmem.ErrNotExist) || errors.Is(err, gitmem.ErrIsDir) {
			return "", notExist(path)
		}
		if err != nil {
			return "", err
		}
		content := string(data)
		at := occurrences(content, oldStr)
		switch len(at) {
		case 0:
			return "", fail("No replacement was performed, old_str `%s` did not appear verbatim in %s.", policy.Clip(oldStr, policy.MaxEchoBytes), path)
		case 1:
		default:
			return "", fail("No replacement was performed. Multiple occurrences of old_str `%s` in lines: %s. Please ensure it is unique",
				policy.Clip(oldStr, policy.MaxEchoBytes), policy.LineList(linesOf(content, at), policy.MaxEchoLines))
		}
		updated, start, err := h.place(sc, rel, path, content[:at[0]], content[at[0]+len(oldStr):], tx)
		if err != nil {
			return "", err
		}
		if err := h.checkWrite(tx, path, rel, len(updated)); err != nil {
			return "", err
		}
		line := lineOf(updated, start)
		tx.SetTrailer(gitmem.TrailerLine, strconv.Itoa(line))
		return snippet(updated, line), tx.WriteFile(rel, []byte(updated))
	}, func(c gitmem.Commit) (string, error) {
		data, err := h.repo.ReadFileAt(in.ctx, c.Hash, rel)
		if err != nil {
			return "", err
		}
		line, _ := strconv.Atoi(c.Trailer(gitmem.TrailerLine))
		return snippet(string(data), max(line, 1)), nil
	}, h.madeBy(in.ctx, rel, sc, func(old string, exists bool) (string, string, bool) {
		at := occurrences(old, oldStr)
		if !exists || len(at) != 1 {
			return "", "", false
		}
		return old[:at[0]], old[at[0]+len(oldStr):], true
	}))
}

func (h *Handler) insert(c Caller, id string, in input) (string, error) {
	path, rel, err := in.path("path")
	if err != nil {
		return "", err
	}
	at, err := in.integer("insert_line")
	if err != nil {
		return "", err
	}
	text, err := in.str("insert_text")
	if err != nil {
		return "", err
	}
	done := fmt.Sprintf("The file %s has been edited.", path)
	meta := h.commitMeta(c, id, "insert", policy.Display(rel), "")
	sc := h.screen(rel, text)
	return h.update(in, meta, func(tx *gitmem.Tx) (string, error) {
		data, err := tx.ReadFile(rel)
		if errors.Is(err, gitmem.ErrNotExist) || errors.Is(err, gitmem.ErrIsDir) {
			return "", fail("The path %s does not exist", path)
		}
		if err != nil {
			return "", err
		}
		content := string(data)
		if n := policy.CountLines(content); at < 0 || at > n {
			return "", fail("Invalid `insert_line` parameter: %d. It should be within the range of lines of the file: [0, %d]", at, n)
		}
		before, after := around(content, at)
		updated, _, err := h.place(sc.trimNewline(), rel, path, before, after, tx)
		if err != nil {
			return "", err
		}
		if err := h.checkWrite(tx, path, rel, len(updated)); err != nil {
			return "", err
		}
		return done, tx.WriteFile(rel, []byte(updated))
	}, func(gitmem.Commit) (string, error) { return done, nil }, h.madeBy(in.ctx, rel, sc.trimNewline(), func(old string, exists bool) (string, string, bool) {
		if !exists || at < 0 || at > policy.CountLines(old) {
			return "", "", false
		}
		before, after := around(old, at)
		return before, after, true
	}))
}

// around is the file's own text either side of an insert at line at
// (0 to its count of lines): the text becomes lines at..., each line
// joined by "\n".
func around(content string, at int) (before, after string) {
	lines := policy.SplitLines(content)
	before, after = strings.Join(lines[:at], "\n"), strings.Join(lines[at:], "\n")
	if at > 0 {
		before += "\n"
	}
	if at < len(lines) {
		after = "\n" + after
	}
	return before, after
}

func (h *Handler) delete(c Caller, id string, in input) (string, error) {
	path, rel, err := in.path("path")
	if err != nil {
		return "", err
	}
	if rel == "" {
		return "", fail("Cannot delete the /memories directory itself")
	}
	done := fmt.Sprintf("Successfully deleted %s", path)
	meta := h.commitMeta(c, id, "delete", policy.Display(rel), "")
	return h.update(in, meta, func(tx *gitmem.Tx) (string, error) {
		if err := tx.Remove(rel); errors.Is(err, gitmem.ErrNotExist) {
			return "", fail("The path %s does not exist", path)
		} else if err != nil {
			return "", err
		}
		return done, nil
	}, func(gitmem.Commit) (string, error) { return done, nil }, nil)
}

func (h *Handler) rename(c Caller, id string, in input) (string, error) {
	oldPath, oldRel, err := in.path("old_path")
	if err != nil {
		return "", err
	}
	newPath, newRel, err := in.path("new_path")
	if err != nil {
		return "", err
	}
	if oldRel == "" {
		return "", fail("Cannot rename the /memories directory itself")
	}
	if err := h.screenPath(newRel); err != nil {
		return "", err
	}
	done := fmt.Sprintf("Successfully renamed %s to %s", oldPath, newPath)
	meta := h.commitMeta(c, id, "rename", policy.Display(oldRel), policy.Display(newRel))
	return h.update(in, meta, func(tx *gitmem.Tx) (string, error) {
		// The reference checks the destination before the source.
		if _, err := tx.Stat(newRel); err == nil || newRel == "" {
			return "", fail("The destination %s already exists", newPath)
		}
		err := tx.Rename(oldRel, newRel)
		switch {
		case errors.Is(err, gitmem.ErrNotExist):
			return "", fail("The path %s does not exist", oldPath)
		case errors.Is(err, gitmem.ErrExist):
			return "", fail("The destination %s already exists", newPath)
		case errors.Is(err, gitmem.ErrInsideItself):
			return "", fail("Cannot rename %s to %s: a folder cannot be moved into itself", oldPath, newPath)
		}
		return done, parentErr(err, "rename "+oldPath+" to "+newPath)
	}, func(gitmem.Commit) (string, error) { return done, nil }, nil)
}
