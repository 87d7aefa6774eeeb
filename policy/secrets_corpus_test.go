package policy

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ordinaryNote writes a note of the kind a model keeps in memory, with
// the content that trips naive secret detectors but is no secret: commit
// and blob hashes, UUIDs, image digests, package integrity hashes, build
// ids, URLs with query strings, placeholders, words like "key" and
// "token" in prose, config without credentials.
func ordinaryNote(r *rand.Rand) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	hex := func(n int) string { return randomString(r, hexLow, n) }
	uuid := func() string { return hex(8) + "-" + hex(4) + "-4" + hex(3) + "-a" + hex(3) + "-" + hex(12) }
	name := pick("Alice", "Bob", "Chen", "Dana", "Emeka", "Fatima", "Grace", "Hiro", "Ines", "Jonas")
	project := pick("billing", "search", "onboarding", "mobile app", "data pipeline", "docs site", "auth service")
	lines := []string{"# " + pick("Notes", "Preferences", "Project notes", "Meeting notes", "Runbook", "Todo") + ": " + project, ""}
	for range 6 + r.IntN(10) {
		lines = append(lines, pick(
			name+" prefers "+pick("green tea", "short answers", "meetings before noon", "Python over Go", "dark mode", "bullet points")+".",
			"Key takeaway: "+pick("ship the fix on Monday", "the "+project+" team owns the migration", "latency matters more than cost")+".",
			"The "+project+" repo is at https://github.com/example/"+strings.ReplaceAll(project, " ", "-")+" (branch main).",
			"Fixed in commit "+hex(40)+"; reverted in "+hex(7)+".",
			"Ticket "+pick("PROJ", "OPS", "SEC")+fmt.Sprintf("-%d", 100+r.IntN(9000))+" is blocked on review.",
			"Request id "+uuid()+" failed with a 502 at "+time.Date(2026, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), 0, 0, time.UTC).Format(time.RFC3339)+".",
			"Image: ghcr.io/example/"+pick("api", "worker", "web")+"@sha256:"+hex(64),
			"npm integrity sha512-"+randomString(r, alnum+"+/", 86)+"==",
			"Build "+hex(12)+" passed; artifact checksum "+hex(64)+".",
			"Dashboard: https://grafana.example.com/d/"+randomString(r, alnum, 9)+"/latency?orgId=1&from=now-6h&to=now",
			"Password policy: at least 12 characters, rotated every 90 days.",
			"The API key lives in the vault under secret/"+strings.ReplaceAll(project, " ", "-")+"/api-key; never paste it here.",
			"Set `api_key = \"<your key>\"` in config.toml before running.",
			"export DATABASE_URL=postgres://app:${DB_PASSWORD}@db.internal:5432/app",
			"Token budget: 4096 tokens per call; max_tokens = 1024.",
			"Use `git rebase -i HEAD~"+fmt.Sprint(2+r.IntN(5))+"` to squash before merging.",
			"timeout = "+fmt.Sprint(5+r.IntN(60))+"s, retries = "+fmt.Sprint(r.IntN(5)),
			"```go\nctx, cancel := context.WithTimeout(ctx, 5*time.Second)\ndefer cancel()\n```",
			"```yaml\nreplicas: 3\nimage: nginx:1.27\nport: 8080\n```",
			"- [ ] "+pick("review the PR", "update the docs", "ask "+name+" about the schema", "renew the TLS cert"),
			"Session key idea: cache per user, evict after "+fmt.Sprint(1+r.IntN(24))+"h.",
			"Author: "+name+" <"+strings.ToLower(name)+"@example.com>",
			"Object id "+randomString(r, alnum, 24)+" is the canonical record.",
			"Use the staging environment at https://staging.example.com/?ref="+randomString(r, alnum, 8)+".",
			"Cache key for the weekly report: "+hex(64),
			"Auth header format: `Authorization: Bearer <token>`.",
		))
	}
	return strings.Join(lines, "\n") + "\n"
}

// keyLikeIDs are lines that hold a random identifier right after a
// key-like word: no secret, but exactly the shape gitleaks' generic rule
// looks for.
func keyLikeID(r *rand.Rand) string {
	hex := func(n int) string { return randomString(r, hexLow, n) }
	switch r.IntN(3) {
	case 0:
		return "idempotency_key = " + hex(8) + "-" + hex(4) + "-4" + hex(3) + "-a" + hex(3) + "-" + hex(12)
	case 1:
		return "access log id: " + hex(32)
	}
	return "auth request token: " + randomString(r, alnum, 20)
}

// plantedNote hides a planted secret in an ordinary note, in one of the
// shapes a model writes (a sentence, an env line, a code block, JSON).
func plantedNote(r *rand.Rand, p plant) string {
	note := strings.Split(ordinaryNote(r), "\n")
	at := 2 + r.IntN(len(note)-2)
	note = append(note[:at], append([]string{strings.TrimSuffix(p.text, "\n")}, note[at:]...)...)
	return strings.Join(note, "\n")
}

// TestScreeningRates measures the secret rules on two corpora and prints
// the table of docs/performance.md ("Secret screening"):
//
//	GITMEM_SCREEN_REPORT=1 go test ./policy -run ScreeningRates -v
//
// GITMEM_SCREEN_CORPUS=DIR[:DIR...] adds every Markdown file under DIR as real
// ordinary text (the Go module cache, say). Without the variables it runs
// a small sample. It fails if over 2% of ordinary notes are flagged or
// under 95% of any kind of planted secret is found: the generated keys
// miss a rule now and then where the upstream rule is stricter than the
// generator (an OpenAI key ending in "-" is not matched by gitleaks).
func TestScreeningRates(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	n := 60
	report := os.Getenv("GITMEM_SCREEN_REPORT") != ""
	if report {
		n = 2000
	}
	r := rand.New(rand.NewPCG(7, 11))

	// False positives on ordinary notes.
	fp, fpRules := 0, map[string]int{}
	bytes := 0
	for range n {
		note := ordinaryNote(r)
		bytes += len(note)
		if fs := s.Find("notes.md", note); len(fs) > 0 {
			fp++
			for _, f := range fs {
				fpRules[f.Rule]++
			}
		}
	}
	t.Logf("ordinary notes: %d notes (%d KiB), %d with a finding (%.2f%%) %v", n, bytes>>10, fp, 100*float64(fp)/float64(n), fpRules)
	ids := 0
	for range n {
		if len(s.Find("notes.md", keyLikeID(r))) > 0 {
			ids++
		}
	}
	t.Logf("identifiers under key-like names (idempotency_key = <uuid>, access log id: <hex>, auth request token: <random>): %d of %d flagged (%.1f%%)",
		ids, n, 100*float64(ids)/float64(n))
	if fp*50 > n {
		t.Errorf("more than 2%% of ordinary notes were flagged")
	}

	// Detection of planted secrets.
	found, total := map[string]int{}, map[string]int{}
	for range n {
		for _, p := range plants(r) {
			total[p.kind]++
			text := plantedNote(r, p)
			for _, f := range s.Find("notes.md", text) {
				if text[f.Start:f.End] == p.secret {
					found[p.kind]++
					break
				}
			}
		}
	}
	var kinds []string
	all, hit := 0, 0
	for k := range total {
		kinds = append(kinds, k)
		all += total[k]
		hit += found[k]
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		t.Logf("planted %-12s %4d/%d found", k, found[k], total[k])
		if found[k]*100 < total[k]*95 {
			t.Errorf("planted %s: only %d of %d found", k, found[k], total[k])
		}
	}
	t.Logf("planted secrets: %d/%d found (%.2f%%)", hit, all, 100*float64(hit)/float64(all))

	for _, dir := range filepath.SplitList(os.Getenv("GITMEM_SCREEN_CORPUS")) {
		files, flagged, size := 0, 0, 0
		rules := map[string]int{}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.EqualFold(filepath.Ext(p), ".md") {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil || len(data) > 1<<20 {
				return nil
			}
			files++
			size += len(data)
			if fs := s.Find(filepath.Base(p), string(data)); len(fs) > 0 {
				flagged++
				for _, f := range fs {
					rules[f.Rule]++
				}
			}
			return nil
		})
		t.Logf("markdown under %s: %d files (%d MiB), %d with a finding (%.2f%%) %v", dir, files, size>>20, flagged, 100*float64(flagged)/float64(max(files, 1)), rules)
	}
}

// BenchmarkFind measures the rules on notes of 1, 10 and 100 KiB, as Find
// runs them and (whole) as every regex over the whole text.
func BenchmarkFind(b *testing.B) {
	s := DefaultSecretRules()
	r := rand.New(rand.NewPCG(1, 1))
	for _, size := range []int{1 << 10, 10 << 10, 100 << 10} {
		var note strings.Builder
		for note.Len() < size {
			note.WriteString(ordinaryNote(r))
		}
		text := note.String()[:size]
		for _, fast := range []bool{true, false} {
			name := fmt.Sprintf("%dKiB", size>>10)
			if !fast {
				name += "/whole"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					s.find("notes.md", text, fast)
				}
			})
		}
	}
}

// TestFastFindMatchesWholeText checks that Find, which runs each rule only
// where a match can be, finds exactly what running every rule's regex over
// the whole text finds, on ordinary notes, notes with planted secrets, and
// (with GITMEM_SCREEN_CORPUS) every Markdown file under a folder.
func TestFastFindMatchesWholeText(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	anchored, stripped, windowed, whole := 0, 0, 0, 0
	for _, r := range s.rules {
		switch {
		case r.anchored != nil:
			anchored++
		case r.wholeText:
			whole++
		default:
			windowed++
		}
		if r.stripped != nil {
			stripped++
		}
	}
	t.Logf("%d rules: %d anchored at their keywords, %d windowed, %d on the whole text; %d without their optional prefix",
		len(s.rules), anchored, windowed, whole, stripped)
	if anchored < 150 {
		t.Errorf("only %d rules are anchored at their keywords", anchored)
	}
	check := func(what, path, text string) {
		t.Helper()
		fast, slow := s.find(path, text, true), s.find(path, text, false)
		if !slices.Equal(fast, slow) {
			t.Errorf("%s: fast %+v, whole text %+v", what, fast, slow)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	n := 25
	if os.Getenv("GITMEM_SCREEN_REPORT") != "" {
		n = 2000
	}
	for i := range n {
		check(fmt.Sprintf("ordinary note %d", i), "notes.md", ordinaryNote(r))
		for _, p := range plants(r) {
			check("planted "+p.kind, "notes.md", plantedNote(r, p))
		}
	}
	// Keywords and secrets at the edges of a text and of the windows.
	gh := "ghp_" + randomString(r, alnum, 36)
	for _, text := range []string{
		"api_key = \"" + randomString(r, alnum, 24) + "\"",
		"x\n\n\n\n\n\n\n\napi_key =\n\n\"" + randomString(r, alnum, 24) + "\"\n",
		gh, gh + "\n", "token:" + gh, strings.Repeat("key ", 2000) + "api_key=" + randomString(r, alnum, 20),
		"password = " + randomString(r, alnum, 16) + "\npassword = " + randomString(r, alnum, 16),
	} {
		check(fmt.Sprintf("%.40q", text), "a.md", text)
	}
	for _, dir := range filepath.SplitList(os.Getenv("GITMEM_SCREEN_CORPUS")) {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".md") {
				if data, err := os.ReadFile(p); err == nil && len(data) <= 1<<20 {
					check(p, filepath.Base(p), string(data))
				}
			}
			return nil
		})
	}
}
