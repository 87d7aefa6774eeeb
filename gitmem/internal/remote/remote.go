// Package remote talks to git remotes for gitmem: it lists a remote's
// refs, fetches the objects gitmem lacks and pushes the ones the remote
// lacks, through any transport git has — a repository on this machine (a
// path or file://, read and written directly, no git program needed),
// git://, http(s) (the smart protocol) and ssh (go-git's clients).
//
// gitmem decides what to send: the objects are computed from what changed
// (gitdir.Graph.Missing), never by walking the whole history, and sent as
// one pack; what arrives is stored durably by gitdir.Store.Receive. Errors
// are this package's own (no go-git error leaves it), worded for an
// operator.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// Auth holds the credentials for a remote. They come from flags or the
// environment and are never written into the repository.
type Auth struct {
	// User is the HTTP user (default "x-access-token" with a token), or
	// the ssh user when the URL names none (default "git").
	User     string
	Password string
	// Token is sent as the password of HTTP basic auth, which GitHub,
	// GitLab (user "oauth2") and Gitea accept.
	Token string
	// SSHKey is a private key file; without it the ssh agent
	// (SSH_AUTH_SOCK) is asked.
	SSHKey           string
	SSHKeyPassphrase string
}

// Refs maps ref names to the commits they name.
type Refs map[plumbing.ReferenceName]plumbing.Hash

// Update moves a ref from Old to New (zero Old: create it). The remote
// applies it only if the ref still holds Old: every push is a
// compare-and-swap.
type Update struct {
	Name     plumbing.ReferenceName
	Old, New plumbing.Hash
}

// RejectedError is a ref update the remote refused; nothing of it was
// applied.
type RejectedError struct {
	Ref    string
	Reason string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("the remote refused to update %s: %s", e.Ref, e.Reason)
}

// Errors worth telling apart.
var (
	ErrNotFound = errors.New("the remote repository was not found")
	ErrAuth     = errors.New("the remote refused the credentials (set GITMEM_REMOTE_TOKEN, GITMEM_REMOTE_PASSWORD or GITMEM_SSH_KEY)")
	ErrNoAuth   = errors.New("the remote needs credentials (set GITMEM_REMOTE_TOKEN, GITMEM_REMOTE_PASSWORD or GITMEM_SSH_KEY)")
)

// Conn is a connection to a remote for one fetch or one push.
type Conn interface {
	// Refs are the remote's refs as it advertised them.
	Refs() Refs
	// Fetch stores in dst, durably, the objects reachable from wants that
	// are not reachable from haves (commits dst has); it returns how
	// many objects arrived. More than limit bytes is refused.
	Fetch(ctx context.Context, dst *gd.Store, wants, haves []plumbing.Hash, limit int64) (int, error)
	// Push sends the objects, read from src, and applies the updates;
	// with several updates, all or none where the remote can promise it.
	Push(ctx context.Context, src *gd.Store, objects []plumbing.Hash, updates []Update) error
	Close() error
}

// CheckURL refuses a URL gitmem cannot use or must not store: one that
// carries a password (credentials belong in the environment), or a
// control character (a newline, a tab, DEL: stored, it would forge lines
// where remotes are listed).
func CheckURL(url string) error {
	if i := strings.IndexFunc(url, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%s holds a control character (%q); a remote URL cannot", policy.QuoteName(url), []rune(url[i:])[0])
	}
	if helper, ok := remoteHelper(url); ok {
		return fmt.Errorf("%s: gitmem speaks file paths, file://, git://, http(s):// and ssh, not git's remote helper %s::", policy.QuoteName(url), policy.ClipName(helper))
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return fmt.Errorf("%s is not a remote URL or path: %v", policy.QuoteName(url), err)
	}
	if ep.Password != "" {
		return errors.New("the URL holds a password; give it in GITMEM_REMOTE_PASSWORD or GITMEM_REMOTE_TOKEN instead, so that it is not written into the repository")
	}
	switch ep.Protocol {
	case "file", "git", "http", "https", "ssh":
		return nil
	}
	return fmt.Errorf("%s: gitmem speaks file paths, file://, git://, http(s):// and ssh, not %s", policy.QuoteName(url), policy.ClipName(ep.Protocol))
}

// remoteHelper reads git's <transport>::<address> (ext::, fd::, a
// git-remote-<transport> program) as git does: letters, digits, - + .
// then ::. go-git reads such a URL as an scp-like ssh address.
func remoteHelper(url string) (string, bool) {
	i := 0
	for i < len(url) && (url[i] >= 'a' && url[i] <= 'z' || url[i] >= 'A' && url[i] <= 'Z' || url[i] >= '0' && url[i] <= '9' ||
		url[i] == '-' || url[i] == '+' || url[i] == '.') {
		i++
	}
	return url[:i], strings.HasPrefix(url[i:], "::")
}

// Dial connects to the remote at url for a fetch (push false) or a push.
// A relative path is taken relative to base (the repository's folder).
func Dial(ctx context.Context, url, base string, auth Auth, push bool) (Conn, error) {
	if err := CheckURL(url); err != nil {
		return nil, err
	}
	ep, _ := transport.NewEndpoint(url)
	if ep.Protocol == "file" {
		p := ep.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		return dialLocal(p, push)
	}
	return dialNetwork(ctx, ep, auth, push)
}

// network is a Conn over one of go-git's transport sessions.
type network struct {
	up   transport.UploadPackSession
	rp   transport.ReceivePackSession
	adv  *packp.AdvRefs
	refs Refs
}

func dialNetwork(ctx context.Context, ep *transport.Endpoint, auth Auth, push bool) (Conn, error) {
	method, err := authMethod(ep, auth)
	if err != nil {
		return nil, err
	}
	c, err := client.NewClient(ep)
	if err != nil {
		return nil, translate(err)
	}
	n := &network{refs: Refs{}}
	if push {
		var s transport.ReceivePackSession
		if s, err = c.NewReceivePackSession(ep, method); err == nil {
			n.rp = s
			n.adv, err = s.AdvertisedReferencesContext(ctx)
		}
	} else {
		var s transport.UploadPackSession
		if s, err = c.NewUploadPackSession(ep, method); err == nil {
			n.up = s
			n.adv, err = s.AdvertisedReferencesContext(ctx)
			if errors.Is(err, transport.ErrEmptyRemoteRepository) {
				n.adv, err = nil, nil
			}
		}
	}
	if err != nil {
		n.Close()
		return nil, translate(err)
	}
	if n.adv != nil {
		all, err := n.adv.AllReferences()
		if err != nil {
			n.Close()
			return nil, translate(err)
		}
		for name, ref := range all {
			if ref.Type() == plumbing.HashReference && gd.ValidRefName(name.String()) {
				n.refs[name] = ref.Hash()
			}
		}
	}
	return n, nil
}

func authMethod(ep *transport.Endpoint, a Auth) (transport.AuthMethod, error) {
	switch ep.Protocol {
	case "http", "https":
		switch {
		case a.Token != "":
			user := a.User
			if user == "" {
				user = "x-access-token"
			}
			return &githttp.BasicAuth{Username: user, Password: a.Token}, nil
		case a.Password != "":
			return &githttp.BasicAuth{Username: a.User, Password: a.Password}, nil
		}
		return nil, nil
	case "ssh":
		user := ep.User
		if user == "" {
			user = a.User
		}
		if user == "" {
			user = "git"
		}
		if a.SSHKey != "" {
			m, err := gitssh.NewPublicKeysFromFile(user, a.SSHKey, a.SSHKeyPassphrase)
			if err != nil {
				return nil, fmt.Errorf("read the ssh key: %v", err)
			}
			return m, nil
		}
		if os.Getenv("SSH_AUTH_SOCK") == "" {
			return nil, errors.New("no ssh key: set GITMEM_SSH_KEY to a private key file, or run an ssh agent")
		}
		m, err := gitssh.NewSSHAgentAuth(user)
		if err != nil {
			return nil, fmt.Errorf("ask the ssh agent: %v", err)
		}
		return m, nil
	}
	return nil, nil
}

// translate words a transport error for an operator, without go-git's
// types.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return ErrNotFound
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return ErrNoAuth
	case errors.Is(err, transport.ErrAuthorizationFailed), errors.Is(err, transport.ErrInvalidAuthMethod):
		return ErrAuth
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return err
	}
	var te *gd.TooLargeError
	if errors.As(err, &te) {
		return te
	}
	return errors.New(strings.TrimPrefix(err.Error(), "gitmem: "))
}

func (n *network) Refs() Refs { return n.refs }

func (n *network) Fetch(ctx context.Context, dst *gd.Store, wants, haves []plumbing.Hash, limit int64) (int, error) {
	if len(wants) == 0 {
		return 0, nil
	}
	req := packp.NewUploadPackRequestFromCapabilities(n.adv.Capabilities)
	req.Capabilities.Delete(capability.ThinPack) // every delta base must be in the pack
	if n.adv.Capabilities.Supports(capability.NoProgress) {
		req.Capabilities.Set(capability.NoProgress)
	}
	req.Wants = wants
	req.Haves = haves
	resp, err := n.up.UploadPack(ctx, req)
	if errors.Is(err, transport.ErrEmptyUploadPackRequest) {
		return 0, nil
	}
	if err != nil {
		return 0, translate(err)
	}
	defer resp.Close()
	var pack io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	count, err := dst.Receive(pack, limit)
	return count, translate(err)
}

func (n *network) Push(ctx context.Context, src *gd.Store, objects []plumbing.Hash, updates []Update) error {
	req := packp.NewReferenceUpdateRequestFromCapabilities(n.adv.Capabilities)
	if len(updates) > 1 && n.adv.Capabilities.Supports(capability.Atomic) {
		req.Capabilities.Set(capability.Atomic)
	}
	for _, u := range updates {
		req.Commands = append(req.Commands, &packp.Command{Name: u.Name, Old: u.Old, New: u.New})
	}
	ofs := n.adv.Capabilities.Supports(capability.OFSDelta)
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1)
	go func() {
		// src is the push's own (a View), which nothing reads while the
		// pack is sent: it is read mapped, no pread per entry.
		err := src.Mapped(func() error { return src.EncodePack(wr, objects, ofs) })
		wr.CloseWithError(err)
		done <- err
	}()
	rs, err := n.rp.ReceivePack(ctx, req)
	rd.Close()
	if eerr := <-done; err == nil && eerr != nil && !errors.Is(eerr, io.ErrClosedPipe) {
		err = eerr
	}
	// A report of the remote's comes with go-git's error for it: what it
	// says is the error (a refused ref update is a RejectedError).
	if rs != nil {
		if rs.UnpackStatus != "ok" {
			return fmt.Errorf("the remote could not store the objects: %s", rs.UnpackStatus)
		}
		for _, cs := range rs.CommandStatuses {
			if cs.Status != "ok" {
				return &RejectedError{Ref: cs.ReferenceName.String(), Reason: cs.Status}
			}
		}
	}
	return translate(err)
}

func (n *network) Close() error {
	if n.up != nil {
		n.up.Close()
	}
	if n.rp != nil {
		n.rp.Close()
	}
	return nil
}
