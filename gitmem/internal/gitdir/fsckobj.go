package gitdir

import (
	"bytes"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/policy"
)

// The checks git fsck --strict makes of an object's content (git's
// fsck.c, 2.39), the ones that fail it: the same objects fail both. They
// serve gitmem fsck, and a fetch, which refuses what fails them as git's
// transfer.fsckObjects does. What git only warns of even with --strict is
// left out (a 100664 mode, a .gitattributes symlink, a tag's bad name or
// missing tagger). Connectivity (a missing object, an entry naming an
// object of another type) is the caller's, which reads the objects.

// An ObjectProblem is what fails git fsck --strict in an object, under
// git's message id (hasDotgit, badTimezone, ...).
type ObjectProblem struct {
	ID   string
	Text string
}

func (p ObjectProblem) String() string { return p.ID + ": " + p.Text }

// Special files whose blob CheckBlob checks, as a tree entry names them.
const (
	Gitmodules    = ".gitmodules"
	Gitattributes = ".gitattributes"
)

// CheckTree checks a tree. special reports each entry that names a blob
// CheckBlob must check (.gitmodules, .gitattributes, under the names git
// takes for them), with the file it is.
func CheckTree(data []byte, special func(h plumbing.Hash, file string)) []ObjectProblem {
	var out []ObjectProblem
	var nullSha1, fullPath, dot, dotdot, dotgit, zeroPad, dups, unsorted bool
	var prevMode uint32
	var prevName string
	var candidates []string
	first := true
	for i := 0; i < len(data); {
		sp := bytes.IndexByte(data[i:], ' ')
		nul := bytes.IndexByte(data[i:], 0)
		if nul < 0 || i+nul+21 > len(data) {
			return append(out, ObjectProblem{"badTree", "cannot be parsed as a tree (too-short tree object)"})
		}
		if sp <= 0 || sp > nul {
			return append(out, ObjectProblem{"badTree", "cannot be parsed as a tree (malformed mode in tree entry)"})
		}
		modeText := data[i : i+sp]
		mode, err := strconv.ParseUint(string(modeText), 8, 32)
		if err != nil {
			return append(out, ObjectProblem{"badTree", "cannot be parsed as a tree (malformed mode in tree entry)"})
		}
		name := string(data[i+sp+1 : i+nul])
		if name == "" {
			return append(out, ObjectProblem{"badTree", "cannot be parsed as a tree (empty filename in tree entry)"})
		}
		h := plumbing.Hash(data[i+nul+1 : i+nul+21])
		i += nul + 21
		nullSha1 = nullSha1 || h.IsZero()
		fullPath = fullPath || strings.Contains(name, "/")
		dot = dot || name == "."
		dotdot = dotdot || name == ".."
		dotgit = dotgit || policy.IsHFSDot(name, "git") || policy.IsNTFSDot(name, "git", "")
		zeroPad = zeroPad || modeText[0] == '0'
		m := uint32(mode)
		if policy.IsHFSDot(name, "gitmodules") || policy.IsNTFSDot(name, "gitmodules", "gi7eba") {
			switch {
			case m == 0o120000:
				out = append(out, ObjectProblem{"gitmodulesSymlink", ".gitmodules is a symbolic link"})
			case special != nil:
				special(h, Gitmodules)
			}
		}
		if special != nil && m != 0o120000 && (policy.IsHFSDot(name, "gitattributes") || policy.IsNTFSDot(name, "gitattributes", "gi7d29")) {
			special(h, Gitattributes)
		}
		if !first {
			switch verifyOrdered(prevMode, prevName, m, name, &candidates) {
			case treeUnordered:
				unsorted = true
			case treeHasDups:
				dups = true
			}
		}
		first, prevMode, prevName = false, m, name
	}
	for _, p := range []struct {
		on       bool
		id, text string
	}{
		{nullSha1, "nullSha1", "contains entries pointing to null sha1"},
		{fullPath, "fullPathname", "contains full pathnames"},
		{dot, "hasDot", "contains '.'"},
		{dotdot, "hasDotdot", "contains '..'"},
		{dotgit, "hasDotgit", "contains '.git'"},
		{zeroPad, "zeroPaddedFilemode", "contains zero-padded file modes"},
		{dups, "duplicateEntries", "contains duplicate file entries"},
		{unsorted, "treeNotSorted", "not properly sorted"},
	} {
		if p.on {
			out = append(out, ObjectProblem{p.id, p.text})
		}
	}
	return out
}

const (
	treeOrdered = iota
	treeUnordered
	treeHasDups
)

func isDirMode(m uint32) bool { return m&0o170000 == 0o040000 }

func lessThanSlash(c byte) bool { return c != 0 && c < '/' }

// verifyOrdered is git's: entries sort by name, a folder's as if it ended
// in '/'; a file and a folder of one name are duplicates even when other
// names sort between them ("a", "a.c", "a/"), which candidates (names of
// files that may come again as folders) catches.
func verifyOrdered(mode1 uint32, name1 string, mode2 uint32, name2 string, candidates *[]string) int {
	n := min(len(name1), len(name2))
	if c := strings.Compare(name1[:n], name2[:n]); c < 0 {
		return treeOrdered
	} else if c > 0 {
		return treeUnordered
	}
	var c1, c2 byte
	if n < len(name1) {
		c1 = name1[n]
	}
	if n < len(name2) {
		c2 = name2[n]
	}
	if c1 == 0 && c2 == 0 {
		return treeHasDups
	}
	if c1 == 0 && isDirMode(mode1) {
		c1 = '/'
	}
	if c2 == 0 && isDirMode(mode2) {
		c2 = '/'
	}
	if c1 == 0 && lessThanSlash(c2) {
		*candidates = append(*candidates, name1)
	} else if c2 == '/' && lessThanSlash(c1) {
		for len(*candidates) > 0 {
			top := (*candidates)[len(*candidates)-1]
			rest, ok := strings.CutPrefix(name2, top)
			if !ok {
				break
			}
			if rest == "" {
				return treeHasDups
			}
			if lessThanSlash(rest[0]) {
				break
			}
			*candidates = (*candidates)[:len(*candidates)-1]
		}
	}
	if c1 < c2 {
		return treeOrdered
	}
	return treeUnordered
}

// CheckCommit checks a commit's headers (the first problem, as git
// reports it).
func CheckCommit(data []byte) []ObjectProblem {
	if p, ok := verifyHeaders(data); !ok {
		return []ObjectProblem{p}
	}
	rest, ok := bytes.CutPrefix(data, []byte("tree "))
	if !ok {
		return []ObjectProblem{{"missingTree", "invalid format - expected 'tree' line"}}
	}
	if rest, ok = hexLine(rest); !ok {
		return []ObjectProblem{{"badTreeSha1", "invalid 'tree' line format - bad sha1"}}
	}
	for {
		r, ok := bytes.CutPrefix(rest, []byte("parent "))
		if !ok {
			break
		}
		if rest, ok = hexLine(r); !ok {
			return []ObjectProblem{{"badParentSha1", "invalid 'parent' line format - bad sha1"}}
		}
	}
	authors := 0
	for {
		r, ok := bytes.CutPrefix(rest, []byte("author "))
		if !ok {
			break
		}
		authors++
		if p, ok := checkIdent(r); !ok {
			return []ObjectProblem{p}
		}
		rest = r[bytes.IndexByte(r, '\n')+1:]
	}
	switch {
	case authors == 0:
		return []ObjectProblem{{"missingAuthor", "invalid format - expected 'author' line"}}
	case authors > 1:
		return []ObjectProblem{{"multipleAuthors", "invalid format - multiple 'author' lines"}}
	}
	r, ok := bytes.CutPrefix(rest, []byte("committer "))
	if !ok {
		return []ObjectProblem{{"missingCommitter", "invalid format - expected 'committer' line"}}
	}
	if p, ok := checkIdent(r); !ok {
		return []ObjectProblem{p}
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return []ObjectProblem{{"nulInCommit", "NUL byte in the commit object body"}}
	}
	return nil
}

// CheckTag checks a tag's headers.
func CheckTag(data []byte) []ObjectProblem {
	if p, ok := verifyHeaders(data); !ok {
		return []ObjectProblem{p}
	}
	rest, ok := bytes.CutPrefix(data, []byte("object "))
	if !ok {
		return []ObjectProblem{{"missingObject", "invalid format - expected 'object' line"}}
	}
	if rest, ok = hexLine(rest); !ok {
		return []ObjectProblem{{"badObjectSha1", "invalid 'object' line format - bad sha1"}}
	}
	r, ok := bytes.CutPrefix(rest, []byte("type "))
	if !ok {
		return []ObjectProblem{{"missingTypeEntry", "invalid format - expected 'type' line"}}
	}
	nl := bytes.IndexByte(r, '\n')
	if nl < 0 {
		return []ObjectProblem{{"missingType", "invalid format - unexpected end after 'type' line"}}
	}
	if _, err := plumbing.ParseObjectType(string(r[:nl])); err != nil || string(r[:nl]) == "ofs-delta" || string(r[:nl]) == "ref-delta" {
		return []ObjectProblem{{"badType", "invalid 'type' value"}}
	}
	r, ok = bytes.CutPrefix(r[nl+1:], []byte("tag "))
	if !ok {
		return []ObjectProblem{{"missingTagEntry", "invalid format - expected 'tag' line"}}
	}
	nl = bytes.IndexByte(r, '\n')
	if nl < 0 {
		return []ObjectProblem{{"missingTag", "invalid format - unexpected end after 'type' line"}}
	}
	if r, ok = bytes.CutPrefix(r[nl+1:], []byte("tagger ")); ok { // a tag without one is only warned of
		if p, ok := checkIdent(r); !ok {
			return []ObjectProblem{p}
		}
	}
	return nil
}

// verifyHeaders checks that the header lines end (at a blank line, or at
// the end) and hold no NUL.
func verifyHeaders(data []byte) (ObjectProblem, bool) {
	for i, c := range data {
		if c == 0 {
			return ObjectProblem{"nulInHeader", fmt.Sprintf("unterminated header: NUL at offset %d", i)}, false
		}
		if c == '\n' && i+1 < len(data) && data[i+1] == '\n' {
			return ObjectProblem{}, true
		}
	}
	if len(data) > 0 && data[len(data)-1] == '\n' {
		return ObjectProblem{}, true // headers only, ended by a newline
	}
	return ObjectProblem{"unterminatedHeader", "unterminated header"}, false
}

// hexLine takes a hash and a newline from the start of b.
func hexLine(b []byte) ([]byte, bool) {
	if len(b) < 41 || b[40] != '\n' || !plumbing.IsHash(string(b[:40])) {
		return b, false
	}
	return b[41:], true
}

// checkIdent checks an author, committer or tagger line (git's
// fsck_ident): "Name <email> seconds +hhmm".
func checkIdent(b []byte) (ObjectProblem, bool) {
	bad := func(id, what string) (ObjectProblem, bool) {
		return ObjectProblem{id, "invalid author/committer line - " + what}, false
	}
	at := func(i int) byte {
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	p := 0
	if at(p) == '<' {
		return bad("missingNameBeforeEmail", "missing space before email")
	}
	for at(p) != 0 && at(p) != '<' && at(p) != '>' && at(p) != '\n' {
		p++
	}
	if at(p) == '>' {
		return bad("badName", "bad name")
	}
	if at(p) != '<' {
		return bad("missingEmail", "missing email")
	}
	if at(p-1) != ' ' {
		return bad("missingSpaceBeforeEmail", "missing space before email")
	}
	p++
	for at(p) != 0 && at(p) != '<' && at(p) != '>' && at(p) != '\n' {
		p++
	}
	if at(p) != '>' {
		return bad("badEmail", "bad email")
	}
	p++
	if at(p) != ' ' {
		return bad("missingSpaceBeforeDate", "missing space before date")
	}
	p++
	if at(p) == '0' && at(p+1) != ' ' {
		return bad("zeroPaddedDate", "zero-padded date")
	}
	// The date as git's strtoumax reads it: white space and a sign may
	// come first, and a negative date or one past int64 overflows.
	q := p
	for c := at(q); c == ' ' || c >= '\t' && c <= '\r'; c = at(q) {
		q++
	}
	neg := at(q) == '-'
	if at(q) == '-' || at(q) == '+' {
		q++
	}
	start := q
	for isDigit(at(q)) {
		q++
	}
	end := p // nothing read
	if q > start {
		end = q
		if v, err := strconv.ParseUint(string(b[start:q]), 10, 64); err != nil || v > math.MaxInt64 || neg && v != 0 {
			return bad("badDateOverflow", "date causes integer overflow")
		}
	}
	if end == p || at(end) != ' ' {
		return bad("badDate", "bad date")
	}
	p = end + 1
	if (at(p) != '+' && at(p) != '-') || !isDigit(at(p+1)) || !isDigit(at(p+2)) || !isDigit(at(p+3)) || !isDigit(at(p+4)) || at(p+5) != '\n' {
		return bad("badTimezone", "bad time zone")
	}
	return ObjectProblem{}, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// CheckBlob checks the blob of a special file (a tree names it so, see
// CheckTree): .gitmodules as git's submodule checks take it, and
// .gitattributes for the lines git cannot parse.
func CheckBlob(data []byte, file string) []ObjectProblem {
	switch file {
	case Gitattributes:
		if len(data) > 100<<20 {
			return []ObjectProblem{{"gitattributesLarge", ".gitattributes too large to parse"}}
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 2048 {
				return []ObjectProblem{{"gitattributesLineLength", ".gitattributes has too long lines to parse"}}
			}
		}
	case Gitmodules:
		return checkGitmodules(data)
	}
	return nil
}

// checkGitmodules reads .gitmodules as git config (sections
// [submodule "name"], keys path, url and update) and refuses what git
// refuses: a name that leaves the folder, a path or url that reads as an
// option, an update that runs a command.
func checkGitmodules(data []byte) []ObjectProblem {
	var out []ObjectProblem
	name, inSub := "", false
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
			continue
		case l[0] == '[':
			end := strings.LastIndexByte(l, ']')
			if end < 0 {
				return out // git cannot parse it: only warned of
			}
			sec := strings.TrimSpace(l[1:end])
			kind, sub, quoted := strings.Cut(sec, " ")
			inSub = strings.EqualFold(kind, "submodule") && quoted
			if inSub {
				name = unquote(strings.TrimSpace(sub))
				if badSubmoduleName(name) {
					out = append(out, ObjectProblem{"gitmodulesName", "disallowed submodule name: " + name})
				}
			}
			continue
		}
		if !inSub {
			continue
		}
		key, value, _ := strings.Cut(l, "=")
		key, value = strings.ToLower(strings.TrimSpace(key)), unquote(strings.TrimSpace(value))
		switch {
		case key == "url" && badSubmoduleURL(value):
			out = append(out, ObjectProblem{"gitmodulesUrl", "disallowed submodule url: " + value})
		case key == "path" && strings.HasPrefix(value, "-"):
			out = append(out, ObjectProblem{"gitmodulesPath", "disallowed submodule path: " + value})
		case key == "update" && strings.HasPrefix(value, "!"):
			out = append(out, ObjectProblem{"gitmodulesUpdate", "disallowed submodule update setting: " + value})
		}
	}
	return out
}

// badSubmoduleName is git's check_submodule_name: a ".." component.
func badSubmoduleName(name string) bool {
	for _, c := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if c == ".." {
			return true
		}
	}
	return name == ""
}

// badSubmoduleURL is git's check_submodule_url: an option, or (relative
// or git://) one with a newline once URL-decoded or that climbs out to a
// host, or (http, https, ftp, ftps) one without a host or with a newline.
func badSubmoduleURL(u string) bool {
	if strings.HasPrefix(u, "-") {
		return true
	}
	decoded, err := url.PathUnescape(u)
	if err != nil {
		decoded = u
	}
	if strings.HasPrefix(u, "./") || strings.HasPrefix(u, "../") || strings.HasPrefix(u, "git://") {
		if strings.Contains(decoded, "\n") {
			return true
		}
		rest, dots := u, 0
		for {
			if r, ok := strings.CutPrefix(rest, "./"); ok {
				rest = r
			} else if r, ok := strings.CutPrefix(rest, "../"); ok {
				rest, dots = r, dots+1
			} else {
				break
			}
		}
		return dots > 0 && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "/"))
	}
	for _, scheme := range []string{"http://", "https://", "ftp://", "ftps://"} {
		if rest, ok := strings.CutPrefix(u, scheme); ok {
			host, _, _ := strings.Cut(rest, "/")
			if i := strings.LastIndexByte(host, '@'); i >= 0 {
				host = host[i+1:]
			}
			return host == "" || strings.Contains(decoded, "\n")
		}
	}
	return false
}

// unquote takes a config value's quotes and escapes off.
func unquote(s string) string {
	if !strings.Contains(s, `"`) && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
