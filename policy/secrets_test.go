package policy

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestVendoredSecretRulesParse(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	// gitleaks v8.30.1 has 222 rules; one (pkcs12-file) matches file names
	// only. gitmem.toml adds url-password.
	if s.Len() != 222 || s.Skipped != 1 {
		t.Errorf("%d rules, %d skipped; want 222 and 1", s.Len(), s.Skipped)
	}
	if _, err := ParseSecretRules([]byte("[[rules]]\nid = \"x\"\nregex = '''(a'''\n")); err == nil {
		t.Error("a rule whose regex does not compile was accepted")
	}
	if _, err := ParseSecretRules([]byte("[[rules]]\nid = \"x\"\nregex = '''a'''\nsecretGroup = 2\n")); err == nil {
		t.Error("a secretGroup beyond the regex's groups was accepted")
	}
}

// plant is a secret of one kind, generated from a seeded source so the
// tests are deterministic: the text holding it, the rule that must find it,
// and the secret itself.
type plant struct {
	kind, text, rule, secret string
}

func randomString(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upperAN = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	hexLow  = "0123456789abcdef"
	urlSafe = alnum + "_-"
)

// plants returns one secret of each kind the screening must catch, in the
// shapes a model would write them into a note.
func plants(r *rand.Rand) []plant {
	aws := "AKIA" + randomString(r, upperAN, 16)
	gh := "ghp_" + randomString(r, alnum, 36)
	ghFine := "github_pat_" + randomString(r, alnum, 22) + "_" + randomString(r, alnum, 59)
	ant := "sk-ant-api03-" + randomString(r, urlSafe, 93) + "AA"
	oai := "sk-proj-" + randomString(r, urlSafe, 74) + "T3BlbkFJ" + randomString(r, urlSafe, 74)
	stripe := "sk_live_" + randomString(r, alnum, 24)
	slack := "xoxb-" + randomString(r, "0123456789", 12) + "-" + randomString(r, "0123456789", 12) + "-" + randomString(r, alnum, 24)
	gcp := "AIza" + randomString(r, urlSafe, 35)
	pw := randomString(r, alnum, 14)
	generic := randomString(r, alnum, 24)
	jwt := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiI" + randomString(r, alnum, 30) + "." + randomString(r, urlSafe, 43)
	npm := "npm_" + randomString(r, alnum, 36)
	pem := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + randomString(r, alnum+"+/", 70) + "\n" + randomString(r, alnum+"+/", 70) + "\n-----END OPENSSH PRIVATE KEY-----"
	return []plant{
		{"aws", "AWS key for the backup job: " + aws + "\n", "aws-access-token", aws},
		{"github", "The user's GitHub token is " + gh + " (expires in May)\n", "github-pat", gh},
		{"github-fine", "deploy token: " + ghFine + "\n", "github-fine-grained-pat", ghFine},
		{"anthropic", "export ANTHROPIC_API_KEY=" + ant + "\n", "anthropic-api-key", ant},
		{"openai", "openai key " + oai + "\n", "openai-api-key", oai},
		{"stripe", "Stripe: " + stripe + "\n", "stripe-access-token", stripe},
		{"slack", "bot token " + slack + "\n", "slack-bot-token", slack},
		{"gcp", "maps key " + gcp + "\n", "gcp-api-key", gcp},
		{"url", "db: postgres://app:" + pw + "@db.internal:5432/prod\n", "url-password", pw},
		{"generic", "api_key = \"" + generic + "\"\n", "generic-api-key", generic},
		{"jwt", "session cookie " + jwt + "\n", "jwt", jwt},
		{"npm", "//registry.npmjs.org/:_authToken=" + npm + "\n", "npm-access-token", npm},
		{"pem", "the server key:\n" + pem + "\n", "private-key", pem},
	}
}

func TestFindPlantedSecrets(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range plants(r) {
		text := "# Notes\n\nLikes green tea.\n" + p.text + "Meeting on Tuesday.\n"
		fs := s.Find("notes.md", text)
		if len(fs) != 1 {
			t.Errorf("%s: %d findings %+v in %q", p.kind, len(fs), fs, text)
			continue
		}
		f := fs[0]
		line := 4 + strings.Count(p.text[:strings.Index(p.text, p.secret)], "\n")
		if f.Rule != p.rule || text[f.Start:f.End] != p.secret || f.Line != line {
			t.Errorf("%s: found %s %q on line %d; want %s %q on line %d", p.kind, f.Rule, text[f.Start:f.End], f.Line, p.rule, p.secret, line)
		}
		masked, lines := MaskSecrets(text, fs)
		if strings.Contains(masked, p.secret) || !strings.Contains(masked, "[REDACTED:"+p.rule+"]") {
			t.Errorf("%s: masked text %q", p.kind, masked)
		}
		if got := SplitLines(masked)[lines[0]-1]; !strings.Contains(got, f.Mask()) {
			t.Errorf("%s: placeholder said to be on line %d, which is %q", p.kind, lines[0], got)
		}
		if again := s.Find("notes.md", masked); len(again) != 0 {
			t.Errorf("%s: the masked text still has findings %+v", p.kind, again)
		}
	}
}

func TestFindIgnoresOrdinaryText(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	for _, text := range []string{
		"The user likes green tea and prefers meetings before noon.\n",
		"Key takeaway: ship the fix on Monday.\n",
		"password policy: at least 12 characters\n",
		"db: postgres://user:password@localhost/app\n",              // a placeholder
		"url: https://${DB_USER}:${DB_PASSWORD}@db.example.com/x\n", // variables
		"Example AWS key from the docs: AKIAIOSFODNN7EXAMPLE\n",     // gitleaks allowlists it
		"token = ${GITHUB_TOKEN}\n",
		"commit 3f2a9c1 fixed the login bug\n",
		"Visit https://example.com/path?q=1 for details.\n",
	} {
		if fs := s.Find("notes.md", text); len(fs) > 0 {
			t.Errorf("%q: findings %+v", text, fs)
		}
	}
}

func TestFindOrdersAndDeduplicates(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	r := rand.New(rand.NewPCG(3, 4))
	gh := "ghp_" + randomString(r, alnum, 36)
	aws := "AKIA" + randomString(r, upperAN, 16)
	// "token: ghp_..." matches both github-pat and generic-api-key: the
	// provider's rule wins, and the secret is reported once.
	text := "line one\ntoken: " + gh + "\nthen " + aws + "\n"
	fs := s.Find("a.md", text)
	if len(fs) != 2 || fs[0].Rule != "github-pat" || fs[0].Line != 2 || fs[1].Rule != "aws-access-token" || fs[1].Line != 3 {
		t.Fatalf("findings %+v", fs)
	}
	want := "line one\ntoken: [REDACTED:github-pat]\nthen [REDACTED:aws-access-token]\n"
	if got, lines := MaskSecrets(text, fs); got != want || lines[0] != 2 || lines[1] != 3 {
		t.Errorf("masked %q %v, want %q [2 3]", got, lines, want)
	}
	// A masked key that spanned lines moves what follows it up.
	pem := "-----BEGIN PRIVATE KEY-----\n" + randomString(r, alnum, 64) + "\n" + randomString(r, alnum, 64) + "\n-----END PRIVATE KEY-----"
	text = pem + "\nand " + aws + "\n"
	fs = s.Find("a.md", text)
	if got, lines := MaskSecrets(text, fs); len(fs) != 2 || fs[1].Line != 5 || lines[1] != 2 ||
		got != "[REDACTED:private-key]\nand [REDACTED:aws-access-token]\n" {
		t.Errorf("masked %q %v from %+v", got, lines, fs)
	}
}

func TestParseScreenMode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"off", "refuse", "mask"} {
		if m, err := ParseScreenMode(s); err != nil || string(m) != s {
			t.Errorf("%s: %v %v", s, m, err)
		}
	}
	if _, err := ParseScreenMode("strip"); err == nil || err.Error() != `secret screening is off, refuse or mask, not "strip"` {
		t.Errorf("strip: %v", err)
	}
}
