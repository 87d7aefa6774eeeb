package policy

import (
	"strings"
	"unicode/utf8"
)

// gitNames are git's control files with the prefix of their NTFS short
// names that git also takes for them (is_ntfs_dotgitmodules and the
// rest; .git's own short name is git~1, which IsNTFSDot knows).
var gitNames = []struct{ needle, shortPrefix string }{
	{"git", ""},
	{"gitmodules", "gi7eba"},
	{"gitattributes", "gi7d29"},
	{"gitignore", "gi250a"},
}

// isGitName reports whether a file or folder name is one of git's
// control files as git reads a tree on any file system: exactly, or in
// any letter case with trailing dots and spaces (Windows drops them), an
// NTFS stream or short name (`.git::$INDEX_ALLOCATION`, `git~1`,
// `GITMOD~1`), or with the code points HFS+ ignores (`.g\u200cit`). git
// refuses such a name for .git in a tree (`git fsck --strict`:
// hasDotgit) and reads the others as .gitmodules and the rest.
func isGitName(name string) bool {
	for _, g := range gitNames {
		if IsHFSDot(name, g.needle) || IsNTFSDot(name, g.needle, g.shortPrefix) {
			return true
		}
	}
	return false
}

// IsHFSDot reports whether name is "." and needle as HFS+ takes it:
// case-insensitive, ignoring the code points HFS+ ignores (git's
// is_hfs_dotgit).
func IsHFSDot(name, needle string) bool {
	next := func() rune {
		for name != "" {
			r, n := utf8.DecodeRuneInString(name)
			name = name[n:]
			switch {
			case r == utf8.RuneError && n == 1, r == 0xfffe, r == 0xffff:
				return 0 // malformed (git takes U+FFFE and U+FFFF for so too): the name ends here
			case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
				continue
			}
			return r
		}
		return 0
	}
	if next() != '.' {
		return false
	}
	for i := 0; i < len(needle); i++ {
		c := next()
		if c > 127 || asciiLower(byte(c)) != needle[i] {
			return false
		}
	}
	c := next()
	return c == 0 || c == '/'
}

func asciiLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// IsNTFSDot reports whether name is "." and needle as NTFS takes it:
// case-insensitive, with trailing spaces and periods, an alternate stream
// (":..."), or a short 8.3 name: the first six letters then ~1 to ~4, or
// shortPrefix then ~ and a digit (git's is_ntfs_dot_generic; for .git,
// git~1 only).
func IsNTFSDot(name, needle, shortPrefix string) bool {
	at := func(i int) byte {
		if i < len(name) {
			return name[i]
		}
		return 0
	}
	onlySpacesAndPeriods := func(i int) bool {
		for ; ; i++ {
			c := at(i)
			if c == 0 || c == ':' || shortPrefix == "" && (c == '/' || c == '\\') {
				return true
			}
			if c != ' ' && c != '.' {
				return false
			}
		}
	}
	if at(0) == '.' && len(name) > len(needle) && strings.EqualFold(name[1:1+len(needle)], needle) {
		return onlySpacesAndPeriods(1 + len(needle))
	}
	if shortPrefix == "" { // .git: git~1 only
		return len(name) >= 5 && strings.EqualFold(name[:3], needle) && name[3] == '~' && name[4] == '1' && onlySpacesAndPeriods(5)
	}
	if len(name) >= 8 && strings.EqualFold(name[:6], needle[:6]) && name[6] == '~' && name[7] >= '1' && name[7] <= '4' {
		return onlySpacesAndPeriods(8)
	}
	tilde := false
	for i := 0; i < 8; i++ {
		c := at(i)
		switch {
		case c == 0:
			return false
		case tilde:
			if c < '0' || c > '9' {
				return false
			}
		case c == '~':
			i++
			if c := at(i); c < '1' || c > '9' {
				return false
			}
			tilde = true
		case i >= 6 || c&0x80 != 0 || asciiLower(c) != shortPrefix[i]:
			return false
		}
	}
	return onlySpacesAndPeriods(8)
}
