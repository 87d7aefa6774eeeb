package policy

import (
	"errors"
	"fmt"
)

// CheckGlob says what is wrong with a glob over memory paths (expire's
// --keep: doublestar's syntax, * within a folder, ** across folders,
// ?, [a-z], {a,b}, \ escaping the next character), or nil for a glob
// that is well formed. It refuses exactly what doublestar refuses.
func CheckGlob(g string) error {
	if g == "" {
		return errors.New("an empty glob")
	}
	depth := 0 // {...} open
	for i := 0; i < len(g); i++ {
		switch g[i] {
		case '\\':
			if i++; i >= len(g) {
				return fmt.Errorf("%q ends in a lone \\ (\\ escapes the character after it)", g)
			}
		case '[':
			start := i
			if i++; i < len(g) && (g[i] == '^' || g[i] == '!') {
				i++
			}
			if i < len(g) && g[i] == ']' {
				return fmt.Errorf("%q has an empty [] at byte %d (a class needs a character: [a-z]; \\[ matches a [ itself)", g, start+1)
			}
			for ; i < len(g) && g[i] != ']'; i++ {
				if g[i] == '\\' {
					i++
				}
			}
			if i >= len(g) {
				return fmt.Errorf("%q has a [ at byte %d that no ] closes (\\[ matches a [ itself)", g, start+1)
			}
		case '{':
			depth++
		case '}':
			if depth == 0 {
				return fmt.Errorf("%q has a } at byte %d that no { opens (\\} matches a } itself)", g, i+1)
			}
			depth--
		}
	}
	if depth > 0 {
		return fmt.Errorf("%q has a { that no } closes (\\{ matches a { itself)", g)
	}
	return nil
}
