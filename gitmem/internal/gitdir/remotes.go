package gitdir

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/config"
)

// Remotes are git's: a [remote "NAME"] section of .git/config with its
// url and the usual fetch refspec, so that plain `git remote`, `git fetch`
// and `git push` work on a gitmem repository too.

// RemoteConfig is one remote of .git/config.
type RemoteConfig struct {
	Name string
	URL  string
}

// remoteName is compiled at the first use (0.2 ms: its {0,63} is 63
// states), not in every command's start-up.
var remoteName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// ValidRemoteName accepts the names gitmem gives remotes: letters, digits,
// '.', '_' and '-', not starting with a punctuation mark, at most 64.
func ValidRemoteName(name string) bool {
	return remoteName().MatchString(name) && !strings.Contains(name, "..") && !strings.HasSuffix(name, ".lock")
}

func readConfig(gitDir string) (*config.Config, []byte, error) {
	data, err := ReadFile(filepath.Join(gitDir, "config"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	c := config.New()
	if err := config.NewDecoder(bytes.NewReader(data)).Decode(c); err != nil {
		return nil, nil, err
	}
	return c, data, nil
}

// Remotes lists the remotes of .git/config, in the file's order.
func Remotes(gitDir string) ([]RemoteConfig, error) {
	c, _, err := readConfig(gitDir)
	if err != nil {
		return nil, err
	}
	var out []RemoteConfig
	for _, s := range c.Section("remote").Subsections {
		out = append(out, RemoteConfig{Name: s.Name, URL: s.Option("url")})
	}
	return out, nil
}

// ErrRemoteExists and ErrNoRemote are AddRemote's and RemoveRemote's
// refusals.
var (
	ErrRemoteExists = errors.New("a remote of that name exists")
	ErrNoRemote     = errors.New("no remote of that name")
)

// AddRemote appends a remote to .git/config (the rest of the file stays as
// it was written).
func AddRemote(gitDir, name, url string) error {
	c, data, err := readConfig(gitDir)
	if err != nil {
		return err
	}
	if c.Section("remote").HasSubsection(name) {
		return ErrRemoteExists
	}
	add := config.New()
	add.Section("remote").Subsection(name).
		SetOption("url", url).
		SetOption("fetch", "+refs/heads/*:refs/remotes/"+name+"/*")
	var b bytes.Buffer
	if err := config.NewEncoder(&b).Encode(add); err != nil {
		return err
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	return ReplaceLocked(context.Background(), filepath.Join(gitDir, "config"), append(slices.Clip(data), b.Bytes()...), nil)
}

// RemoveRemote deletes a remote's section from .git/config and its
// remote-tracking refs.
func RemoveRemote(gitDir, name string) error {
	c, _, err := readConfig(gitDir)
	if err != nil {
		return err
	}
	s := c.Section("remote")
	if !s.HasSubsection(name) {
		return ErrNoRemote
	}
	s.RemoveSubsection(name)
	var b bytes.Buffer
	if err := config.NewEncoder(&b).Encode(c); err != nil {
		return err
	}
	if err := ReplaceLocked(context.Background(), filepath.Join(gitDir, "config"), b.Bytes(), nil); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(gitDir, "refs", "remotes", name)); err != nil {
		return err
	}
	return removePackedRefs(gitDir, "refs/remotes/"+name+"/")
}

// removePackedRefs drops the lines of packed-refs under prefix.
func removePackedRefs(gitDir, prefix string) error {
	path := filepath.Join(gitDir, "packed-refs")
	data, err := readPackedRefs(gitDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var out []string
	skip := false
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(l, "^") && skip { // the peeled line of a dropped tag
			continue
		}
		_, name, _ := strings.Cut(strings.TrimSpace(l), " ")
		skip = strings.HasPrefix(name, prefix)
		if !skip {
			out = append(out, l)
		}
	}
	return ReplaceLocked(context.Background(), path, []byte(strings.Join(out, "")), nil)
}
