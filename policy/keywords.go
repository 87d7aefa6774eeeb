package policy

// keywordMatcher finds every occurrence of a set of ASCII keywords in a
// text in one pass, ignoring ASCII case (an Aho-Corasick automaton, as a
// table indexed by byte class). The secret rules use it to run a rule's
// regex only near its keywords.
type keywordMatcher struct {
	class  [256]uint8 // byte -> column; 0: a byte no keyword holds
	cols   int
	next   []int32   // state*cols + class -> state
	out    [][]int32 // state -> the keywords that end there
	lens   []int     // keyword -> its length
	nwords int
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func newKeywordMatcher(words []string) *keywordMatcher {
	m := &keywordMatcher{cols: 1, nwords: len(words)}
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			c := lowerASCII(w[i])
			if m.class[c] == 0 {
				m.class[c] = uint8(m.cols)
				m.cols++
			}
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		m.class[c] = m.class[c+'a'-'A']
	}
	// The trie.
	type node struct {
		kids map[uint8]int32
		out  []int32
	}
	nodes := []node{{kids: map[uint8]int32{}}}
	for id, w := range words {
		s := int32(0)
		for i := 0; i < len(w); i++ {
			c := m.class[lowerASCII(w[i])]
			k, ok := nodes[s].kids[c]
			if !ok {
				k = int32(len(nodes))
				nodes = append(nodes, node{kids: map[uint8]int32{}})
				nodes[s].kids[c] = k
			}
			s = k
		}
		nodes[s].out = append(nodes[s].out, int32(id))
		m.lens = append(m.lens, len(w))
	}
	// Failure links, breadth first, folded into a full transition table.
	m.next = make([]int32, len(nodes)*m.cols)
	m.out = make([][]int32, len(nodes))
	fail := make([]int32, len(nodes))
	queue := []int32{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		m.out[s] = append(nodes[s].out, m.out[fail[s]]...)
		for c := 0; c < m.cols; c++ {
			if k, ok := nodes[s].kids[uint8(c)]; ok {
				if s != 0 {
					fail[k] = m.next[int(fail[s])*m.cols+c]
				}
				m.next[int(s)*m.cols+c] = k
				queue = append(queue, k)
			} else if s != 0 {
				m.next[int(s)*m.cols+c] = m.next[int(fail[s])*m.cols+c]
			}
		}
	}
	return m
}

// find calls fn with each keyword found in text and the offset where it
// starts.
func (m *keywordMatcher) find(text string, fn func(word, at int)) {
	s := int32(0)
	for i := 0; i < len(text); i++ {
		s = m.next[int(s)*m.cols+int(m.class[text[i]])]
		for _, w := range m.out[s] {
			fn(int(w), i+1-m.lens[w])
		}
	}
}
