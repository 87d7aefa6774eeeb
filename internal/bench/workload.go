package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The operation mix: each round is one call of each memory command on
// small, realistic memory files (a few hundred bytes of markdown):
//
//	create       a new file in one of the seeded folders
//	str_replace  the "revision: N" line of a seeded file, N -> N+1
//	insert       a note at line 3 of a seeded file
//	view         a seeded file
//	rename       the new file, within its folder
//	delete       the renamed file
//
// The file count stays the same from round to round. Every backend runs
// the same sequence (the same seeds), so their numbers compare.

// Op is one memory tool call.
type Op struct {
	Cmd   string
	Input map[string]any
}

// Commands in the order a round runs them.
var Commands = []string{"create", "str_replace", "insert", "view", "rename", "delete"}

// seedName is the repository-relative path (under memories/) of seeded
// file i: 100 files to a folder.
func seedName(i int) string { return fmt.Sprintf("d%03d/f%05d.md", i/100, i) }

var topics = []string{"the billing service", "the onboarding flow", "the user's travel plans", "the data pipeline",
	"the weekly report", "the mobile app", "the hiring loop", "the search index"}

// seedContent is seeded file i as the history generator leaves it after
// its last edit (call number last; 0: never edited).
func seedContent(i, last int) string {
	return fmt.Sprintf(`# Notes on %s (%d)

revision: 0

- The user prefers short answers with a code example first.
- Build with make test before committing; CI runs on Debian.
- Open question: move the cache to Redis? Decide after the load test.
- Contact: the platform team, channel #platform-%d.
history: %d
`, topics[i%len(topics)], i, i%17, last)
}

// newContent is the text of a file the mix creates.
func newContent(client, round int) string {
	return fmt.Sprintf(`# Session notes %d-%d

- The user asked to keep answers under ten lines.
- Preferred language: Go; tests with the race detector.
- Follow up on %s next week.
`, client, round, topics[round%len(topics)])
}

// workload generates the mix for one client. Seeded files are shared
// state (revs), but each client only edits its own (index = client mod
// clients), so the runs never race on a file.
type workload struct {
	rng       *rand.Rand
	client    int
	tag       string // makes new file names unique across runs
	own       []int  // seeded files this client edits
	revs      []int  // current revision of every seeded file (shared)
	round     int
	mutations bool // leave out view
	movesOnly bool // create, rename and delete alone
}

func newWorkload(files, client, clients int, revs []int, tag string, mutationsOnly bool) *workload {
	w := &workload{rng: rand.New(rand.NewPCG(uint64(client)+1, uint64(files))), client: client, tag: tag,
		revs: revs, mutations: mutationsOnly}
	for i := client; i < files; i += clients {
		w.own = append(w.own, i)
	}
	return w
}

func memPath(rel string) string { return "/memories/" + rel }

// next returns the calls of the next round.
func (w *workload) next() []Op {
	r := w.round
	w.round++
	folder := fmt.Sprintf("d%03d", 0)
	var ops []Op
	if len(w.own) > 0 {
		folder = seedName(w.own[w.rng.IntN(len(w.own))])[:4]
	}
	created := fmt.Sprintf("%s/new-%s-c%d-r%d.md", folder, w.tag, w.client, r)
	renamed := fmt.Sprintf("%s/renamed-%s-c%d-r%d.md", folder, w.tag, w.client, r)
	ops = append(ops, Op{"create", map[string]any{"command": "create", "path": memPath(created), "file_text": newContent(w.client, r)}})
	if len(w.own) > 0 && !w.movesOnly {
		i := w.own[w.rng.IntN(len(w.own))]
		ops = append(ops, Op{"str_replace", map[string]any{"command": "str_replace", "path": memPath(seedName(i)),
			"old_str": fmt.Sprintf("revision: %d", w.revs[i]), "new_str": fmt.Sprintf("revision: %d", w.revs[i]+1)}})
		w.revs[i]++
		j := w.own[w.rng.IntN(len(w.own))]
		ops = append(ops, Op{"insert", map[string]any{"command": "insert", "path": memPath(seedName(j)), "insert_line": 3,
			"insert_text": fmt.Sprintf("- Note %d from client %d: the user confirmed the plan.\n", r, w.client)}})
		if !w.mutations {
			k := w.own[w.rng.IntN(len(w.own))]
			ops = append(ops, Op{"view", map[string]any{"command": "view", "path": memPath(seedName(k))}})
		}
	}
	ops = append(ops,
		Op{"rename", map[string]any{"command": "rename", "old_path": memPath(created), "new_path": memPath(renamed)}},
		Op{"delete", map[string]any{"command": "delete", "path": memPath(renamed)}})
	return ops
}

// paths are the memory paths (relative to memories/) an op reads or
// changes, for the backends that commit with git.
func (o Op) paths() []string {
	var out []string
	for _, k := range []string{"path", "old_path", "new_path"} {
		if p, ok := o.Input[k].(string); ok {
			out = append(out, strings.TrimPrefix(p, "/memories/"))
		}
	}
	return out
}
